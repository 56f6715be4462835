# SPDX-License-Identifier: MIT
# bash completion for pyprof-bpf(1): commands, options, option values, PIDs of
# Python processes, files and directories, the agent's stores, and the command
# after `--`.
#
# The options and their values (`--mode=cpu|off-cpu|wall|gil`) are read from
# the binary's own `COMMAND --help`, once per shell, so they cannot drift from
# it; only the format names are listed here (tests/test_install.py checks them
# against --help).

_pyprof_bpf_formats="perf-script perf collapsed folded speedscope pprof flamegraph html svg pstats callgrind heatmap jsonl chrome-trace chrometrace top"

# Fills _pyprof_bpf_opts[CMD] (every option word) and _pyprof_bpf_arg[CMD:OPT]
# (what an option takes: its argument name or its values a|b|c) from the help.
_pyprof_bpf_load()
{
	local bin=$1 cmd=$2 line short long arg words=
	[[ -n ${_pyprof_bpf_opts[$cmd]+set} ]] && return
	while IFS= read -r line; do
		# argp's layout, exactly: "  -p, --pid=PID" or "      --json" (an
		# example line of the text after the options is indented otherwise).
		[[ $line =~ ^(\ \ -([^-\ ]),\ |\ {6})--([a-z][a-z0-9-]*)(=([^ ]+))? ]] || continue
		short=${BASH_REMATCH[2]} long=--${BASH_REMATCH[3]} arg=${BASH_REMATCH[5]}
		words+=" $long"
		[[ -n $arg ]] && _pyprof_bpf_arg[$cmd:$long]=$arg
		if [[ -n $short ]]; then
			words+=" -$short"
			[[ -n $arg ]] && _pyprof_bpf_arg[$cmd:-$short]=$arg
		fi
	done < <("$bin" "$cmd" --help 2>/dev/null)
	_pyprof_bpf_opts[$cmd]=$words
}

# PIDs of the processes that look like Python (their comm or executable).
_pyprof_bpf_pids()
{
	local d comm exe
	for d in /proc/[0-9]*; do
		read -r comm 2>/dev/null <"$d/comm" || continue
		exe=$(readlink "$d/exe" 2>/dev/null)
		[[ $comm == python* || ${exe##*/} == python* ]] && echo "${d#/proc/}"
	done
}

_pyprof_bpf()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	local bin=${COMP_WORDS[0]} cmd=record first=1 i opt arg
	declare -gA _pyprof_bpf_opts _pyprof_bpf_arg
	COMPREPLY=()
	bin=${bin/#\~/$HOME}

	case ${COMP_WORDS[1]} in
	record|dump|report|top|agent)
		cmd=${COMP_WORDS[1]}
		first=2
		;;
	esac
	# After `--` (record, top): the command, then its own arguments.
	for ((i = first; i < COMP_CWORD; i++)); do
		[[ ${COMP_WORDS[i]} == -- ]] || continue
		if ((i == COMP_CWORD - 1)); then
			mapfile -t COMPREPLY < <(compgen -c -- "$cur")
		else
			compopt -o filenames 2>/dev/null
			mapfile -t COMPREPLY < <(compgen -f -- "$cur")
		fi
		return
	done
	_pyprof_bpf_load "$bin" "$cmd"

	# The value of an option: `--opt VALUE`, `--opt=VALUE` (bash splits at
	# the '=': words `--opt`, `=`, `VALUE`) or `-x VALUE`.
	if [[ $cur == = ]]; then
		opt=$prev
		cur=
	elif [[ $prev == = ]]; then
		opt=${COMP_WORDS[COMP_CWORD-2]}
	else
		opt=$prev
	fi
	arg=${_pyprof_bpf_arg[$cmd:$opt]}
	if [[ -n $arg ]]; then
		case $opt in
		-p|--pid)
			# record's -p takes a list: the PID after the last comma.
			local last=${cur##*,}
			mapfile -t COMPREPLY < <(compgen -P "${cur%"$last"}" -W "$(_pyprof_bpf_pids)" -- "$last")
			;;
		-o|--output|--raw|-i|--input|--auth-file|--core|--exe)
			compopt -o filenames 2>/dev/null
			mapfile -t COMPREPLY < <(compgen -f -- "$cur")
			;;
		--output-dir|--spool-dir|--root)
			compopt -o filenames 2>/dev/null
			mapfile -t COMPREPLY < <(compgen -d -- "$cur")
			;;
		--push)
			# KIND=URL: the kind, then the URL is the user's.
			compopt -o nospace 2>/dev/null
			mapfile -t COMPREPLY < <(compgen -W "pyroscope= parca=" -- "$cur")
			;;
		--format)
			if [[ $cmd == record ]]; then
				mapfile -t COMPREPLY < <(compgen -W "$_pyprof_bpf_formats raw" -- "$cur")
			else
				mapfile -t COMPREPLY < <(compgen -W "$_pyprof_bpf_formats" -- "$cur")
			fi
			;;
		*)
			# An enumeration (a|b|c) is offered; a number or a name is not.
			[[ $arg == *"|"* ]] && mapfile -t COMPREPLY < <(compgen -W "${arg//|/ }" -- "$cur")
			;;
		esac
		return
	fi

	if [[ $cur == -* ]]; then
		mapfile -t COMPREPLY < <(compgen -W "${_pyprof_bpf_opts[$cmd]}" -- "$cur")
	elif ((COMP_CWORD == 1)); then
		mapfile -t COMPREPLY < <(compgen -W "record dump report top agent help" -- "$cur")
	elif [[ $cmd == report ]]; then
		compopt -o filenames 2>/dev/null
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
	elif [[ $cmd == record || $cmd == top ]]; then
		# The first word that is not an option starts a command.
		mapfile -t COMPREPLY < <(compgen -c -- "$cur")
	fi
}

complete -F _pyprof_bpf pyprof-bpf
