# pyprof-bpf: a sampling profiler for CPython, assisted by eBPF.
#
#   make setup   install the Debian packages the build needs (root)
#   make test-deps  what the tests need besides (make test and make check run it)
#   make         build .output/*.bpf.o, their skeletons and ./pyprof-bpf
#   make test    run every test (unit tests under ASan/UBSan, then pytest)
#   make check   the edit-build-check loop: build, unit tests, the quick end-to-end tests
#   make bench   side-by-side benchmark against the peers
#   make install uninstall release deb   see "Installing and shipping" below
#   make V=1     show full commands
.DELETE_ON_ERROR:
.SECONDARY:

CLANG     ?= clang
CC        ?= gcc
BPFTOOL   ?= bpftool
# ARCH (x86, arm64): the machine's unless given (make ARCH=arm64 ...); another
# architecture's build goes to .output/ARCH (issue #34: so far its BPF
# objects and skeletons, `make ARCH=arm64 bpf`).
HOST_ARCH := $(shell uname -m | sed 's/x86_64/x86/; s/aarch64/arm64/')
ARCH      := $(HOST_ARCH)
OUTPUT    := $(if $(filter $(HOST_ARCH),$(ARCH)),.output,.output/$(ARCH))
VMLINUX   := vmlinux/$(ARCH)/vmlinux.h
BIN       := pyprof-bpf
OBJCOPY   ?= objcopy
# Another architecture: clang and lld against a sysroot of Debian's packages
# for it (scripts/provision-sysroot.sh ARCH), the binary in $(OUTPUT).
ifneq ($(ARCH),$(HOST_ARCH))
TRIPLE_x86   := x86_64-linux-gnu
TRIPLE_arm64 := aarch64-linux-gnu
SYSROOT   ?= $(or $(PYPROF_CACHE),/var/cache/pyprof-bpf)/sysroot-$(ARCH)
CC        := $(CLANG) --target=$(TRIPLE_$(ARCH)) --sysroot=$(SYSROOT)
LDFLAGS   += -fuse-ld=lld
OBJCOPY   := llvm-objcopy
BIN       := $(OUTPUT)/pyprof-bpf
DEB_ARCH_arm64 := arm64
DEB_ARCH_x86 := amd64
DEB_CROSS := DEB_ARCH=$(DEB_ARCH_$(ARCH)) SYSROOT=$(SYSROOT) TRIPLE=$(TRIPLE_$(ARCH))
export PKG_CONFIG_SYSROOT_DIR := $(SYSROOT)
export PKG_CONFIG_LIBDIR := $(SYSROOT)/usr/lib/$(TRIPLE_$(ARCH))/pkgconfig:$(SYSROOT)/usr/share/pkgconfig
endif

CFLAGS    ?= -O2 -g
CFLAGS    += -std=gnu11 -Wall -Wextra -Werror -Wno-missing-field-initializers \
	     -D_GNU_SOURCE -Ibpf -Iuser -I$(OUTPUT)
LDLIBS    := -lbpf -ldw -lelf -lz -lncursesw

# clang's own system include dirs, for the BPF target (libbpf-bootstrap's way).
CLANG_BPF_SYS_INCLUDES := $(shell $(CLANG) -v -E - </dev/null 2>&1 \
	| sed -n '/<...> search starts here:/,/End of search list./{ s| \(/.*\)|-idirafter \1|p }')

BPF_SRCS  := $(wildcard bpf/*.bpf.c)
BPF_OBJS  := $(patsubst bpf/%.bpf.c,$(OUTPUT)/%.bpf.o,$(BPF_SRCS)) $(OUTPUT)/pyprof_noloop.bpf.o
SKELS     := $(patsubst bpf/%.bpf.c,$(OUTPUT)/%.skel.h,$(BPF_SRCS)) $(OUTPUT)/pyprof_noloop.skel.h
USER_SRCS := $(wildcard user/*/*.c user/*/*/*.c)
USER_HDRS := $(wildcard user/*/*.h user/*/*/*.h)
USER_OBJS := $(patsubst user/%.c,$(OUTPUT)/%.o,$(USER_SRCS))
LIB_OBJS  := $(filter-out $(OUTPUT)/commands/main.o,$(USER_OBJS))

ifeq ($(V),1)
Q =
msg =
else
Q = @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

.PHONY: all bpf clean setup test-deps test test-kernels test-arm64 check unit unit-build bench san fuzz fuzz-build fuzz-replay
# The builds of make test and make check run side by side, one job a CPU.
NPROC := $(shell nproc 2>/dev/null || echo 2)
all: $(BIN)

# The BPF objects and their skeletons alone (any ARCH with a vmlinux/ARCH).
bpf: $(SKELS)

$(OUTPUT):
	$(Q)mkdir -p $@

# vmlinux.h is generated from the running kernel's BTF when missing (see README).
$(VMLINUX):
	$(call msg,GEN,$@)
	$(Q)mkdir -p $(dir $@)
	$(Q)$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@

$(OUTPUT)/%.bpf.o: bpf/%.bpf.c bpf/pyprof.h bpf/pyprof_events.h $(wildcard bpf/*.bpf.h) $(VMLINUX) | $(OUTPUT)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) -g -O2 -Wall -Werror -target bpf -D__TARGET_ARCH_$(ARCH) \
		-Ivmlinux/$(ARCH) -Ibpf $(CLANG_BPF_SYS_INCLUDES) -c $< -o $@
	$(Q)llvm-strip -g $@ 2>/dev/null || true

$(OUTPUT)/%.skel.h: $(OUTPUT)/%.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< > $@

# The program for kernels without bpf_loop (5.10-5.16; bpf/compat.bpf.h):
# the same source built with PYPROF_NO_BPF_LOOP. The loader opens it through
# pyprof.skel.h, so its skeleton (named like the main one) must declare the
# same maps, programs and globals at the same places: all but the embedded
# object's bytes must be the same text, or the build stops.
SKEL_LAYOUT = sed '/^static inline const void \*pyprof_bpf__elf_bytes(size_t \*sz)$$/,/^}$$/d'
$(OUTPUT)/pyprof_noloop.bpf.o: bpf/pyprof.bpf.c bpf/pyprof.h bpf/pyprof_events.h $(wildcard bpf/*.bpf.h) $(VMLINUX) | $(OUTPUT)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) -g -O2 -Wall -Werror -target bpf -D__TARGET_ARCH_$(ARCH) -DPYPROF_NO_BPF_LOOP \
		-Ivmlinux/$(ARCH) -Ibpf $(CLANG_BPF_SYS_INCLUDES) -c $< -o $@
	$(Q)llvm-strip -g $@ 2>/dev/null || true

$(OUTPUT)/pyprof_noloop.skel.h: $(OUTPUT)/pyprof_noloop.bpf.o $(OUTPUT)/pyprof.skel.h
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name pyprof_bpf > $@.tmp
	$(Q)$(SKEL_LAYOUT) $(OUTPUT)/pyprof.skel.h > $@.main
	$(Q)$(SKEL_LAYOUT) $@.tmp > $@.noloop
	$(Q)diff -u $@.main $@.noloop >&2 || { rm -f $@.tmp $@.main $@.noloop; \
		echo "pyprof_noloop.bpf.o declares other maps, programs or globals than pyprof.bpf.o" >&2; exit 1; }
	$(Q)rm -f $@.main $@.noloop
	$(Q)mv -f $@.tmp $@

# The architecture's system call names by number (user/offcpu/syscalls.c):
# <asm/unistd.h>'s __NR_ macros as the compiler sees them (linux-libc-dev's;
# arm64's generic table names some through others, resolved here).
$(OUTPUT)/syscall_table.h: | $(OUTPUT)
	$(call msg,GEN,$@)
	$(Q)echo '#include <asm/unistd.h>' | $(CC) -E -dM -x c - | awk ' \
		$$1 == "#define" && $$2 ~ /^__NR/ { v[$$2] = $$3 } \
		function val(s, d) { while (s in v && d++ < 8) s = v[s]; return s } \
		END { print "/* Generated from <asm/unistd.h>: do not edit. */"; \
		print "static const char *const syscall_table[] = {"; \
		for (k in v) if (k ~ /^__NR_/ && (n = val(k)) ~ /^[0-9]+$$/) { \
			printf "\t[%s] = \"%s\",\n", n, substr(k, 6); c++ } \
		print "};"; if (!c) { print "no __NR_ macro in <asm/unistd.h>" > "/dev/stderr"; exit 1 } }' \
		| { read -r l1; read -r l2; echo "$$l1"; echo "$$l2"; grep '^	\[' | sort -t'[' -k2 -n; echo "};"; } > $@.tmp
	$(Q)mv $@.tmp $@

$(OUTPUT)/%.o: user/%.c $(USER_HDRS) bpf/pyprof.h $(SKELS) | $(OUTPUT)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

$(BIN): $(USER_OBJS)
	$(call msg,BINARY,$@)
	$(Q)$(CC) $(CFLAGS) $(LDFLAGS) $^ $(LDLIBS) -o $@

# Unit tests: every tests/unit/test_*.c is linked against the library objects,
# rebuilt with ASan/UBSan in their own directory.
SAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
SAN_DIR   := $(OUTPUT)/san
$(OUTPUT)/offcpu/syscalls.o $(SAN_DIR)/offcpu/syscalls.o: $(OUTPUT)/syscall_table.h
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(SAN_DIR)/%,$(UNIT_SRCS))
SAN_LIB   := $(patsubst $(OUTPUT)/%.o,$(SAN_DIR)/%.o,$(LIB_OBJS))

$(SAN_DIR)/%.o: user/%.c $(USER_HDRS) bpf/pyprof.h $(SKELS)
	$(Q)mkdir -p $(@D)
	$(call msg,CC-SAN,$@)
	$(Q)$(CC) $(CFLAGS) $(SAN_FLAGS) -c $< -o $@

# The flame graph's script is built in with .incbin (user/output/flamegraph_js.c).
$(OUTPUT)/output/flamegraph_js.o $(SAN_DIR)/output/flamegraph_js.o: user/output/assets/flamegraph.js

$(SAN_DIR)/test_%: tests/unit/test_%.c $(SAN_LIB)
	$(call msg,CC-SAN,$@)
	$(Q)$(CC) $(CFLAGS) $(SAN_FLAGS) $^ $(LDLIBS) -lcmocka -o $@

# test_stack_memo fakes the symbolizer: it links stack_memo alone.
$(SAN_DIR)/test_stack_memo: tests/unit/test_stack_memo.c $(SAN_DIR)/symbols/stack_memo.o
	$(call msg,CC-SAN,$@)
	$(Q)$(CC) $(CFLAGS) $(SAN_FLAGS) $^ -lcmocka -o $@

unit-build: $(UNIT_BINS)

unit: $(UNIT_BINS)
	$(Q)set -e; for t in $(UNIT_BINS); do echo "== $$t"; $$t; done

# The whole binary under ASan/UBSan (the hostile-target suite runs it too).
SAN_BIN := $(SAN_DIR)/pyprof-bpf
$(SAN_DIR)/commands/main.o: $(VERSION_H)
$(SAN_BIN): $(patsubst $(OUTPUT)/%.o,$(SAN_DIR)/%.o,$(USER_OBJS))
	$(call msg,BINARY,$@)
	$(Q)$(CC) $(CFLAGS) $(SAN_FLAGS) $^ $(LDLIBS) -o $@
san: $(SAN_BIN)

# ---- Fuzzing (issue #23) ---------------------------------------------------------------
# Every tests/fuzz/fuzz_NAME.c is a libFuzzer harness (clang -fsanitize=fuzzer with
# ASan/UBSan) linked against the library objects rebuilt with coverage, and against
# tests/fuzz/support/*.c, whose fake remote_mem.c serves a target's memory from the
# fuzzer's input (the real one is left out). Its corpus is tests/fuzz/corpus/NAME/
# (seeds from real interpreters), its crashes tests/fuzz/crashes/NAME/ (kept, fixed).
#   make fuzz [FUZZ_SECONDS=60] [FUZZ=NAME]   run each harness for FUZZ_SECONDS
#   make fuzz-replay                          every corpus and crash once (make test)
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_DIR     := $(OUTPUT)/fuzz
FUZZ_FLAGS   := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS  := -O1 -g -std=gnu11 -Wall -Wextra -Werror -Wno-missing-field-initializers \
		-D_GNU_SOURCE -DPYPROF_FUZZ -Ibpf -Iuser -I$(OUTPUT) -Itests/fuzz/support
FUZZ_SRCS    := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_NAMES   := $(patsubst tests/fuzz/fuzz_%.c,%,$(FUZZ_SRCS))
FUZZ_BINS    := $(patsubst %,$(FUZZ_DIR)/fuzz_%,$(FUZZ_NAMES))
FUZZ_SUPPORT := $(patsubst tests/fuzz/support/%.c,$(FUZZ_DIR)/support/%.o,$(wildcard tests/fuzz/support/*.c))
FUZZ_LIB     := $(FUZZ_DIR)/libpyprof.a
FUZZ_LIB_OBJS := $(patsubst $(OUTPUT)/%.o,$(FUZZ_DIR)/%.o,$(filter-out $(OUTPUT)/target/remote_mem.o,$(LIB_OBJS)))
$(FUZZ_DIR)/offcpu/syscalls.o: $(OUTPUT)/syscall_table.h
$(FUZZ_DIR)/output/flamegraph_js.o: user/output/assets/flamegraph.js

$(FUZZ_DIR)/%.o: user/%.c $(USER_HDRS) bpf/pyprof.h $(SKELS)
	$(Q)mkdir -p $(@D)
	$(call msg,CC-FUZZ,$@)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
$(FUZZ_DIR)/support/%.o: tests/fuzz/support/%.c $(wildcard tests/fuzz/support/*.h) $(USER_HDRS)
	$(Q)mkdir -p $(@D)
	$(call msg,CC-FUZZ,$@)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -c $< -o $@
$(FUZZ_LIB): $(FUZZ_LIB_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^
$(FUZZ_DIR)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_SUPPORT) $(FUZZ_LIB) $(wildcard tests/fuzz/support/*.h)
	$(call msg,FUZZ-LD,$@)
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_FLAGS) -fsanitize=fuzzer $< $(FUZZ_SUPPORT) \
		$(FUZZ_LIB) $(LDLIBS) -o $@

fuzz-build: $(FUZZ_BINS)

# New inputs go to .output/fuzz/work/NAME (merge the interesting ones into the
# corpus with -merge=1); a crash is written to tests/fuzz/crashes/NAME/ and stops the run.
fuzz: $(FUZZ_BINS)
	$(Q)set -e; for n in $(or $(FUZZ),$(FUZZ_NAMES)); do \
		mkdir -p $(FUZZ_DIR)/work/$$n tests/fuzz/crashes/$$n; \
		echo "== fuzz_$$n: $(FUZZ_SECONDS) s"; \
		$(FUZZ_DIR)/fuzz_$$n -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
			-artifact_prefix=tests/fuzz/crashes/$$n/ -timeout=10 -rss_limit_mb=2048 \
			$(FUZZ_DIR)/work/$$n tests/fuzz/corpus/$$n >$(FUZZ_DIR)/$$n.log 2>&1 && rc=0 || rc=$$?; \
		grep -E '^#[0-9]+.*DONE|^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)|ERROR|SUMMARY' \
			$(FUZZ_DIR)/$$n.log || true; \
		test $$rc = 0 || { echo "fuzz_$$n failed: see $(FUZZ_DIR)/$$n.log" >&2; exit 1; }; \
	done

fuzz-replay: $(FUZZ_BINS)
	$(Q)set -e; for n in $(FUZZ_NAMES); do \
		test -n "$$(ls tests/fuzz/corpus/$$n 2>/dev/null)" || { echo "fuzz_$$n: no corpus in tests/fuzz/corpus/$$n" >&2; exit 1; }; \
		echo "== fuzz_$$n: $$(ls tests/fuzz/corpus/$$n | wc -l) corpus, $$(ls tests/fuzz/crashes/$$n 2>/dev/null | wc -l) crashes"; \
		$(FUZZ_DIR)/fuzz_$$n -runs=0 -timeout=10 tests/fuzz/corpus/$$n \
			$$(test -d tests/fuzz/crashes/$$n && echo tests/fuzz/crashes/$$n) >$(FUZZ_DIR)/$$n.replay.log 2>&1 \
			|| { tail -40 $(FUZZ_DIR)/$$n.replay.log >&2; exit 1; }; \
	done

# What building needs, alone (the README's first command); `make test`
# provisions the rest itself.
setup:
	scripts/install-deps.sh --build

# What the tests need beyond the build: the packages, the test interpreters
# and the sid root, the consumers of our formats, the kernels and the arm64
# guest. The scripts are idempotent and return at once when everything is there.
test-deps:
	scripts/install-deps.sh
	scripts/provision-pythons.sh
	scripts/install-consumers.sh
	scripts/provision-minbase.sh
	scripts/provision-kernels.sh
	scripts/provision-sysroot.sh arm64
	scripts/provision-arm64.sh

# Self-sufficient on a fresh machine (test-deps first).
test: test-deps
	$(MAKE) -j$(NPROC) all unit-build san fuzz-build
	$(MAKE) unit
	$(MAKE) fuzz-replay
	/usr/bin/python3 -m pytest -v -p no:cacheprovider --durations=100 tests

# The edit-build-check loop (under 5 minutes here): the build, the unit tests, and the
# end-to-end tests not marked slow, each on one interpreter of each kind (pyenv, system,
# sid: PYPROF_CHECK in tests/conftest.py). `make test` runs everything.
check: test-deps
	$(MAKE) -j$(NPROC) all unit-build
	$(MAKE) unit
	PYPROF_CHECK=1 /usr/bin/python3 -m pytest -q -p no:cacheprovider --durations=20 \
		-m 'not slow' tests

# The kernel matrix alone (issue #33): tests/test_kernels.py, every check in a QEMU
# guest of each of Debian's kernels (KERNELS="bullseye bookworm trixie sid" by default).
# The arm64 cell alone (issue #34): tests/test_arm64.py, the arm64 build's checks in a
# QEMU arm64 guest.
test-arm64:
	scripts/provision-sysroot.sh arm64
	scripts/provision-arm64.sh
	/usr/bin/python3 -m pytest -v -s -p no:cacheprovider tests/test_arm64.py

test-kernels: pyprof-bpf
	scripts/provision-kernels.sh $(KERNELS)
	KERNELS="$(KERNELS)" /usr/bin/python3 -m pytest -v -s -p no:cacheprovider tests/test_kernels.py

bench: pyprof-bpf
	scripts/bench

# ---- Installing and shipping (issue #14) ---------------------------------------------
#   make install [PREFIX=/usr/local] [DESTDIR=]   the binary, pyprof-bpf(1), bash completion,
#                  the agent's systemd unit (SYSTEMDUNITDIR) and its settings,
#                  $(SYSCONFDIR)/default/pyprof-bpf-agent (kept when it exists)
#   make uninstall [PREFIX=] [DESTDIR=]           removes those files (not the directories;
#                  the settings only when unchanged)
#   make release   .output/release/pyprof-bpf: LDLIBS' libraries linked in, glibc dynamic
#   make deb       .output/pyprof-bpf_VERSION_ARCH.deb (dpkg-deb) holding the release binary
# `make install INSTALL_BIN=.output/release/pyprof-bpf` installs the release binary.
VERSION     := 0.1
# The commit --version names: git's, "-dirty" when tracked files differ from it.
ifeq ($(origin COMMIT),undefined)
COMMIT      := $(shell c=$$(git --no-optional-locks -C $(CURDIR) rev-parse --short=12 HEAD 2>/dev/null) \
		 && { git --no-optional-locks -C $(CURDIR) diff --quiet HEAD -- && echo $$c \
		 || echo $$c-dirty; } || echo unknown)
endif
PREFIX      ?= /usr/local
BINDIR      ?= $(PREFIX)/bin
MANDIR      ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
SYSTEMDUNITDIR ?= $(PREFIX)/lib/systemd/system
SYSCONFDIR  ?= /etc
INSTALL     ?= install
INSTALL_BIN ?= pyprof-bpf

# Rewritten only when the version or the commit changes (then main.o is rebuilt).
VERSION_H := $(OUTPUT)/version.h
$(VERSION_H): FORCE | $(OUTPUT)
	$(Q)printf '/* Generated by the Makefile: do not edit. */\n#define PYPROF_VERSION "%s"\n#define PYPROF_COMMIT "%s"\n' \
		'$(VERSION)' '$(COMMIT)' > $@.tmp
	$(Q)if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi
$(OUTPUT)/commands/main.o: $(VERSION_H)

# The release binary: the same objects, the libraries pkg-config names for
# LDLIBS (with their own dependencies, --static) linked from their .a files,
# glibc's libraries dynamically. The BPF object is inside already (skeleton).
RELEASE_DIR     := $(OUTPUT)/release
RELEASE_BIN     := $(RELEASE_DIR)/pyprof-bpf
GLIBC_LIBS      := -lc -lm -ldl -lpthread -lrt -lresolv -pthread
RELEASE_PKGS     = $(patsubst libncursesw,ncursesw,$(patsubst libz,zlib,$(patsubst -l%,lib%,$(filter-out $(GLIBC_LIBS),$(LDLIBS)))))
RELEASE_LDFLAGS := -Wl,-z,relro,-z,now -Wl,--as-needed

$(RELEASE_BIN): $(USER_OBJS) | $(OUTPUT)
	$(call msg,RELEASE,$@)
	$(Q)mkdir -p $(@D)
	$(Q)libs=$$(pkg-config --static --libs $(RELEASE_PKGS)) || { \
		echo "release: pkg-config knows no static link line for: $(RELEASE_PKGS)" >&2; exit 1; }; \
	static=; dynamic=; for l in $$libs; do case " $(GLIBC_LIBS) " in \
		*" $$l "*) dynamic="$$dynamic $$l" ;; *) static="$$static $$l" ;; esac; done; \
	$(CC) $(CFLAGS) $(LDFLAGS) $(RELEASE_LDFLAGS) $^ -Wl,-Bstatic $$static -Wl,-Bdynamic $$dynamic -o $@.tmp
	$(Q)needed=$$(readelf -d $@.tmp | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' \
		| grep -Ev '^(libc|libm|libpthread|libdl|librt|libresolv)\.so\.|^ld-linux' || true); \
	if [ -n "$$needed" ]; then echo "release: still linked dynamically: $$needed" >&2; \
		rm -f $@.tmp; exit 1; fi
	$(Q)$(OBJCOPY) --only-keep-debug $@.tmp $@.debug
	$(Q)$(OBJCOPY) --strip-debug --add-gnu-debuglink=$@.debug $@.tmp $@
	$(Q)rm -f $@.tmp

release: $(RELEASE_BIN)
	@echo "release: $(RELEASE_BIN) ($$(stat -c %s $(RELEASE_BIN)) bytes; debug info in $(RELEASE_BIN).debug)"

# The agent's unit names the installed binary and settings file (sed below);
# the settings are the administrator's once installed: never overwritten, and
# removed by uninstall only when they are still the shipped ones.
AGENT_UNIT     := packaging/pyprof-bpf-agent.service
AGENT_DEFAULTS := packaging/pyprof-bpf-agent.default
AGENT_ENVFILE   = $(SYSCONFDIR)/default/pyprof-bpf-agent

install: $(INSTALL_BIN)
	$(call msg,INSTALL,$(DESTDIR)$(PREFIX))
	$(Q)$(INSTALL) -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(BASHCOMPDIR) \
		$(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(SYSCONFDIR)/default
	$(Q)$(INSTALL) -m 0755 $(INSTALL_BIN) $(DESTDIR)$(BINDIR)/pyprof-bpf
	$(Q)$(INSTALL) -m 0644 man/pyprof-bpf.1 $(DESTDIR)$(MANDIR)/man1/pyprof-bpf.1
	$(Q)$(INSTALL) -m 0644 completion/pyprof-bpf.bash $(DESTDIR)$(BASHCOMPDIR)/pyprof-bpf
	$(Q)sed -e 's|^ExecStart=/usr/local/bin/pyprof-bpf |ExecStart=$(BINDIR)/pyprof-bpf |' \
		-e 's|^EnvironmentFile=/etc/default/pyprof-bpf-agent$$|EnvironmentFile=$(AGENT_ENVFILE)|' \
		$(AGENT_UNIT) > $(DESTDIR)$(SYSTEMDUNITDIR)/pyprof-bpf-agent.service.tmp
	$(Q)grep -qx 'ExecStart=$(BINDIR)/pyprof-bpf agent $$PYPROF_AGENT_ARGS' \
		$(DESTDIR)$(SYSTEMDUNITDIR)/pyprof-bpf-agent.service.tmp || { \
		echo "install: $(AGENT_UNIT): ExecStart= not rewritten" >&2; exit 1; }
	$(Q)chmod 0644 $(DESTDIR)$(SYSTEMDUNITDIR)/pyprof-bpf-agent.service.tmp
	$(Q)mv -f $(DESTDIR)$(SYSTEMDUNITDIR)/pyprof-bpf-agent.service.tmp \
		$(DESTDIR)$(SYSTEMDUNITDIR)/pyprof-bpf-agent.service
	$(Q)if [ -e $(DESTDIR)$(AGENT_ENVFILE) ]; then \
		echo "install: $(DESTDIR)$(AGENT_ENVFILE) exists: kept" >&2; \
	else $(INSTALL) -m 0644 $(AGENT_DEFAULTS) $(DESTDIR)$(AGENT_ENVFILE); fi
	$(Q)if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then \
		systemctl daemon-reload || true; fi

uninstall:
	$(call msg,UNINSTALL,$(DESTDIR)$(PREFIX))
	$(Q)rm -f $(DESTDIR)$(BINDIR)/pyprof-bpf $(DESTDIR)$(MANDIR)/man1/pyprof-bpf.1 \
		$(DESTDIR)$(BASHCOMPDIR)/pyprof-bpf $(DESTDIR)$(SYSTEMDUNITDIR)/pyprof-bpf-agent.service
	$(Q)if cmp -s $(AGENT_DEFAULTS) $(DESTDIR)$(AGENT_ENVFILE); then \
		rm -f $(DESTDIR)$(AGENT_ENVFILE); \
	elif [ -e $(DESTDIR)$(AGENT_ENVFILE) ]; then \
		echo "uninstall: $(DESTDIR)$(AGENT_ENVFILE) was changed: kept" >&2; fi
	$(Q)if [ -z "$(DESTDIR)" ] && [ -d /run/systemd/system ]; then \
		systemctl daemon-reload || true; fi

deb: $(RELEASE_BIN)
	$(call msg,DEB,$(OUTPUT))
	$(Q)RELEASE_PKGS='$(RELEASE_PKGS)' $(DEB_CROSS) scripts/build-deb.sh $(RELEASE_BIN) $(VERSION) $(COMMIT) $(OUTPUT)

.PHONY: install uninstall release deb FORCE
FORCE:

clean:
	$(call msg,CLEAN,)
	$(Q)rm -rf $(OUTPUT) pyprof-bpf
