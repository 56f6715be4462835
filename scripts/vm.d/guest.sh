# guest.sh: the test guest's second stage (scripts/vm-run copies it into the
# run's share; busybox sh runs it as the initramfs's /init hands over).
# Gives the host's root (read-only at /host) a fresh /tmp and /run, proc,
# sys, dev, bpffs, debugfs and tracefs, the sid root its own /tmp and /proc,
# runs /out/cmd.sh in a chroot of /host in the directory /out/cwd names, its
# output to /out/log and its exit code to /out/rc, and powers off.
for fs in proc:proc sysfs:sys devtmpfs:dev tmpfs:tmp tmpfs:run; do
	mount -t ${fs%%:*} ${fs%%:*} /host/${fs#*:}
done
mkdir -p /host/dev/pts /host/dev/shm /host/run/pyprof-vm
mount -t devpts devpts /host/dev/pts
mount -t tmpfs tmpfs /host/dev/shm
mount -t bpf bpf /host/sys/fs/bpf 2>/dev/null
mount -t debugfs debugfs /host/sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs /host/sys/kernel/tracing 2>/dev/null
mount --bind /out /host/run/pyprof-vm
# The directory the command runs in, when it lies where the guest has
# fresh file systems (a clone under /tmp): vm-run shares it as "cwd".
cwd=$(cat /out/cwd)
case $cwd in
/tmp/*|/run/*)
	mkdir -p "/host$cwd"
	mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose cwd "/host$cwd" ||
		echo "vm-guest: cannot mount $cwd"
	;;
esac
sid=$(cat /out/sidroot 2>/dev/null)
if [ -n "$sid" ] && [ -d "/host$sid/proc" ]; then
	mount -t tmpfs tmpfs "/host$sid/tmp"
	mount -t proc proc "/host$sid/proc"
fi
echo "vm-guest: kernel $(uname -r) up; running cmd.sh"
# Another architecture's root (vm-run: arm64): the command runs there, in
# busybox sh, with the host's root at /host and the host's mounts above.
chroot=$(cat /out/chroot 2>/dev/null)
if [ -n "$chroot" ]; then
	r=/host$chroot
	for fs in proc:proc sysfs:sys devtmpfs:dev tmpfs:tmp tmpfs:run; do
		mount -t ${fs%%:*} ${fs%%:*} $r/${fs#*:}
	done
	mount -t bpf bpf $r/sys/fs/bpf 2>/dev/null
	mount -t debugfs debugfs $r/sys/kernel/debug 2>/dev/null
	mount -t tracefs tracefs $r/sys/kernel/tracing 2>/dev/null
	mount --rbind /host $r/host
	mkdir -p $r/run/pyprof-vm
	mount --bind /out $r/run/pyprof-vm
	chroot $r /bin/sh -c 'cd "/host$(cat /run/pyprof-vm/cwd)" && exec /bin/sh /run/pyprof-vm/cmd.sh' \
		>/out/log 2>&1
	echo $? >/out/rc
	sync
	poweroff -f
fi
chroot /host /bin/sh -c 'cd "$(cat /run/pyprof-vm/cwd)" && exec /bin/bash /run/pyprof-vm/cmd.sh' \
	>/out/log 2>&1
echo $? >/out/rc
sync
poweroff -f
