# runtimectl bash kernel driver: one persistent bash that runs the code the agent sends.
# The contract is docs/kernel-protocol.md (fds 0-6, JSON lines on fd 3/4, nonces on fd 1/2,
# snapshot chunks on fd 5, restore from RUNTIMECTL_RESTORE_FD).
#
# How it works, in short:
# - It re-executes itself once as `bash -i` (interactive, no rc files, no job control, no
#   history), so that an error such as an unbound variable under `set -u` or `${x:?}` ends
#   only the current execution, as at a terminal prompt, instead of the whole shell.
# - The code of each `exec` is written to a private file and sourced at the top level of the
#   main loop (never inside a function), so variables, arrays, functions, aliases, options,
#   the environment and the cwd all persist. The file is sourced with the control fds closed
#   and stdin on /dev/null.
# - Driver state lives in variables and functions named __rt_*; they are never snapshotted or
#   listed. The user's `set`/`shopt` options that would disturb the driver (errexit, nounset,
#   xtrace, posix, nocasematch, ...) and the user's ERR/DEBUG traps are taken off while the
#   driver itself runs: a RETURN trap (__rt_ret) does it when the code's file ends, and __rt_pre,
#   the first command on line 1 of the file, puts them back. Driver commands write nothing on
#   fd 2, and never use the fds the code sees for the nonces (private copies of fds 1 and 2).
# - `break`/`continue` typed at the top level of the code would leave the driver's loop; the
#   loops are nested and the file re-sources itself if the code breaks out of all of them.
# - SIGINT is ignored between executions. During one, a trap stops the code: it returns from
#   the sourced file (or from the user's function, and then a DEBUG trap returns from each
#   frame above it) and the execution is reported as "interrupted".
# - The state (what a snapshot restores) is a bash script. Under the agent, the driver writes a
#   fingerprint of it (`declare -p`, the user's functions, aliases) on the agent's file after each
#   execution and the agent decides `changed` (see __rt_fpdone); the script is built only for a
#   snapshot. Without that file (RUNTIMECTL_STATE_FD), it is rebuilt after every execution that
#   may have changed it (see __rt_unchanged) and compared byte for byte with the previous one.

# ---- stage 1: become an interactive shell (same pid; fds 3-6 are inherited) ---------------
if [[ $- != *i* ]]; then
	exec 9>&2
	exec "${BASH:-bash}" --norc --noprofile +o history +H +m -i "${BASH_SOURCE[0]}" 2>/dev/null
	exec 2>&9 9>&-
	printf 'runtimectl bash kernel: cannot start %s -i\n' "${BASH:-bash}" >&2
	exit 70
fi

if [[ -z ${__rt_inited-} ]]; then
	if { true >&9; } 2>/dev/null; then exec 2>&9 9>&-; fi
	set +o history +H +m
	trap '' INT
	trap 'exit 143' TERM
	trap '__rt_cleanup' EXIT
	shopt -s expand_aliases
	BASH_ARGV0=bash # $0, as at a prompt
fi

# ---- helpers -------------------------------------------------------------------------------

__rt_cleanup() {
	[[ -n ${__rt_dir-} && -d $__rt_dir ]] && command rm -rf -- "$__rt_dir" 2>/dev/null
}

# __rt_jstr STRING: sets __rt_j to STRING as a JSON string literal (with the quotes).
__rt_jstr() {
	local LC_ALL=C
	local __rt_s=$1 __rt_c __rt_h
	if [[ $__rt_s == *[\"\\$'\001'-$'\037']* ]]; then
		__rt_s=${__rt_s//"\\"/"\\\\"}
		__rt_s=${__rt_s//"\""/"\\\""}
		__rt_s=${__rt_s//$'\n'/"\\n"}
		__rt_s=${__rt_s//$'\t'/"\\t"}
		__rt_s=${__rt_s//$'\r'/"\\r"}
		while [[ $__rt_s == *[$'\001'-$'\037']* ]]; do
			# (${x/pat*/} rather than ${x%%pat*}: the latter is quadratic in bash)
			__rt_c=${__rt_s/[$'\001'-$'\037']*/}
			__rt_c=${__rt_s:${#__rt_c}:1}
			printf -v __rt_h '\\u%04x' "'$__rt_c"
			__rt_s=${__rt_s//"$__rt_c"/"$__rt_h"}
		done
	fi
	__rt_j="\"$__rt_s\""
}

# __rt_jlist NAME...: sets __rt_j to a JSON array of strings.
__rt_jlist() {
	local __rt_a='' __rt_x
	for __rt_x in "$@"; do
		__rt_jstr "$__rt_x"
		__rt_a+=${__rt_a:+,}$__rt_j
	done
	__rt_j="[$__rt_a]"
}

# __rt_utf8 CODEPOINT: sets __rt_ch to its UTF-8 bytes.
__rt_utf8() {
	local LC_ALL=C
	local -i c=$1
	local f
	if ((c < 0x80)); then
		printf -v f '\\x%02x' "$c"
	elif ((c < 0x800)); then
		printf -v f '\\x%02x\\x%02x' $((0xC0 | c >> 6)) $((0x80 | (c & 0x3F)))
	elif ((c < 0x10000)); then
		printf -v f '\\x%02x\\x%02x\\x%02x' $((0xE0 | c >> 12)) $((0x80 | (c >> 6 & 0x3F))) $((0x80 | (c & 0x3F)))
	else
		printf -v f '\\x%02x\\x%02x\\x%02x\\x%02x' $((0xF0 | c >> 18)) $((0x80 | (c >> 12 & 0x3F))) \
			$((0x80 | (c >> 6 & 0x3F))) $((0x80 | (c & 0x3F)))
	fi
	printf -v __rt_ch '%b' "$f"
}

# __rt_jdecode RAW: decodes the inside of a JSON string in which every escaped backslash has
# already been replaced by \xfe and every escaped quote by \xff (bytes that never occur in
# UTF-8); sets __rt_v. Locale independent; \uXXXX (with surrogate pairs) becomes UTF-8.
__rt_jdecode() {
	local LC_ALL=C
	local v=$1 t h h2 esc
	local -i cp lo
	[[ $v == *$'\xff'* ]] && v=${v//$'\xff'/"\""}
	if [[ $v == *"\\"* ]]; then
		[[ $v == *"\\n"* ]] && v=${v//"\\n"/$'\n'}
		[[ $v == *"\\t"* ]] && v=${v//"\\t"/$'\t'}
		[[ $v == *"\\r"* ]] && v=${v//"\\r"/$'\r'}
		[[ $v == *"\\/"* ]] && v=${v//"\\/"/"/"}
		[[ $v == *"\\b"* ]] && v=${v//"\\b"/$'\b'}
		[[ $v == *"\\f"* ]] && v=${v//"\\f"/$'\f'}
		while [[ $v == *"\\u"* ]]; do
			t=${v/"\\u"*/}
			t=${v:${#t}+2}
			h=${t:0:4}
			if [[ $h != [0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F] ]]; then
				v=${v/"\\u"/$'\xfd'} # not an escape: keep it as text
				continue
			fi
			cp=16#$h
			esc="\\u$h"
			if ((cp >= 0xD800 && cp <= 0xDBFF)) && [[ ${t:4:2} == "\\u" ]]; then
				h2=${t:6:4}
				if [[ $h2 == [0-9a-fA-F][0-9a-fA-F][0-9a-fA-F][0-9a-fA-F] ]] && lo=16#$h2 && ((lo >= 0xDC00 && lo <= 0xDFFF)); then
					cp='0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)'
					esc+="\\u$h2"
					__rt_utf8 "$cp"
					v=${v//"$esc"/"$__rt_ch"}
					continue
				fi
			fi
			if ((cp >= 0xD800 && cp <= 0xDFFF)); then
				__rt_utf8 0xFFFD # a lone surrogate: replace only this one
				v=${v/"$esc"/"$__rt_ch"}
				continue
			fi
			if ((cp == 0x5C)); then
				__rt_ch=$'\xfe'
			elif ((cp == 0)); then
				__rt_ch=''
			else
				__rt_utf8 "$cp"
			fi
			v=${v//"$esc"/"$__rt_ch"}
		done
		[[ $v == *$'\xfd'* ]] && v=${v//$'\xfd'/"\\u"}
	fi
	[[ $v == *$'\xfe'* ]] && v=${v//$'\xfe'/"\\"}
	__rt_v=$v
}

# __rt_parse LINE: parses one flat JSON object (string, number, true/false/null values) into
# the associative array __rt_req (values decoded). Returns 1 when LINE is not such an object.
# "code" is not decoded when "code_b64" is there (see __rt_prepare_exec).
# Cost: linear in the line, plus (for "code") one pass over the code per escape kind present.
__rt_parse() {
	local LC_ALL=C
	local s=$1 k v
	local -A raw=()
	__rt_req=()
	[[ $s == *"\\\\"* ]] && s=${s//"\\\\"/$'\xfe'}
	[[ $s == *"\\\""* ]] && s=${s//"\\\""/$'\xff'}
	s=${s#"${s%%[![:space:]]*}"}
	[[ $s == "{"* ]] || return 1
	s=${s:1}
	while :; do
		s=${s#"${s%%[![:space:],]*}"}
		[[ $s == \"* ]] || break
		s=${s:1}
		# (${x/pat*/} rather than ${x%%pat*}: the latter is quadratic in bash)
		k=${s/\"*/}
		[[ $k == "$s" ]] && return 1
		s=${s:${#k}+1}
		__rt_jdecode "$k"
		k=$__rt_v
		s=${s#"${s%%[![:space:]]*}"}
		[[ $s == :* ]] || return 1
		s=${s:1}
		s=${s#"${s%%[![:space:]]*}"}
		if [[ $s == \"* ]]; then
			s=${s:1}
			v=${s/\"*/}
			[[ $v == "$s" ]] && return 1
			s=${s:${#v}+1}
			raw[$k]=$v
		else
			v=${s/[,\}]*/}
			s=${s:${#v}}
			v=${v%"${v##*[![:space:]]}"}
			__rt_req[$k]=$v
		fi
	done
	[[ $s == "}"* ]] || return 1
	for k in "${!raw[@]}"; do
		if [[ $k == code && -n ${raw[code_b64]+set} ]]; then
			__rt_req[$k]=
			continue
		fi
		__rt_jdecode "${raw[$k]}"
		__rt_req[$k]=$__rt_v
	done
	return 0
}

# __rt_re_exec: an exec request as the agent sends it when it has no other fields (Go's
# encoding/json of agent/driver.go's driverRequest: its fields in their order, no spaces; "sync"
# is for drivers with displays; "session", the session's name, in group 8), the code in group 3
# as JSON escapes it. One regex match instead of __rt_parse's pass in bash over the line.
__rt_re_exec='^\{"op":"exec","id":"([^"\\]*)","seq":([0-9]+),"code":"(([^"\\]|\\.)*)","nonce":"([0-9a-f]*)"(,"sync":"[0-9a-f]*")?(,"session":"([^"\\]*)")?\}$'

# __rt_emit LINE: one event on fd 4, one write.
__rt_emit() {
	printf '%s\n' "$1" >&4
}

# Variables that are never part of the state (besides the prefixes tested in __rt_skipvar).
declare -A __rt_skip=()
for __rt_x in BASH BASHOPTS BASHPID EUID UID PPID SHELLOPTS RANDOM SRANDOM SECONDS LINENO FUNCNAME \
	GROUPS DIRSTACK PIPESTATUS _ HOSTNAME HISTCMD EPOCHREALTIME EPOCHSECONDS COLUMNS LINES PWD; do
	__rt_skip[$__rt_x]=1
done
unset __rt_x

# __rt_skipvar NAME: true for variables that are never part of the state.
__rt_skipvar() {
	[[ -n ${__rt_skip[$1]-} || $1 == __rt_* || $1 == BASH_* || $1 == COMP_* || $1 == RUNTIMECTL_* ]]
}

# The options that would disturb the driver's own code: off while the driver runs, put back
# for the user's code. `set` letters (plus pipefail and posix) and shopt names.
__rt_toggle_set=aeuxvfCETk
__rt_toggle_shopt_a=(nocasematch nocaseglob failglob nullglob extdebug localvar_inherit localvar_unset
	patsub_replacement xpg_echo assoc_expand_once)

# __rt_capture [TRAPS]: records the user's options (call it while they are in effect, with
# stderr sent to /dev/null so that xtrace shows nothing), then switches to the driver's. Sets
# __rt_uflags, __rt_uset, __rt_upipefail, __rt_uposix, __rt_ushopt, __rt_opts and
# __rt_optstail (the option parts of the state script); with TRAPS, also the user's ERR/DEBUG
# traps from __rt_ret's files.
__rt_capture() {
	__rt_uflags=$-
	__rt_upipefail= __rt_uposix=
	[[ :$SHELLOPTS: == *:pipefail:* ]] && __rt_upipefail=1
	[[ :$SHELLOPTS: == *:posix:* ]] && __rt_uposix=1
	set +aeuxvfCETk
	set +o pipefail +o posix
	[[ -d $__rt_dir ]] || command mkdir -p -m 700 -- "$__rt_dir"
	if [[ -n ${1-} ]]; then
		# The user's ERR and DEBUG traps, which __rt_ret has saved and cleared, so that they do
		# not run for the driver's commands; __rt_pre sets them again. (Traps set or cleared in
		# a function do not outlive it, hence the work in __rt_ret.) With such traps,
		# __rt_pre leaves $? alone (an ERR trap would run).
		__rt_readfile "$__rt_dir/trap.err"
		__rt_utraps=$__rt_s
		__rt_readfile "$__rt_dir/trap.dbg"
		[[ $__rt_s == *__rt_inuser* ]] || __rt_utraps+=$__rt_s # (not the driver's own, after SIGINT)
	fi
	# $-, SHELLOPTS and BASHOPTS show every option: when they are as last time, so is the rest
	if [[ "$__rt_uflags|$__rt_upipefail|$__rt_uposix|$SHELLOPTS|$BASHOPTS" == "$__rt_optkey" ]]; then
		((${#__rt_ushopt[@]})) && shopt -u "${__rt_ushopt[@]}"
		return 0
	fi
	__rt_optkey="$__rt_uflags|$__rt_upipefail|$__rt_uposix|$SHELLOPTS|$BASHOPTS"
	local __rt_l __rt_o __rt_x __rt_tail='' __rt_re='' __rt_out='' __rt_i
	# the letters __rt_pre sets again (xtrace apart: last), worked out once for these options
	__rt_uset=
	for ((__rt_i = 0; __rt_i < ${#__rt_toggle_set}; __rt_i++)); do
		__rt_x=${__rt_toggle_set:__rt_i:1}
		[[ $__rt_x != [xv] && $__rt_uflags == *"$__rt_x"* ]] && __rt_uset+=$__rt_x
	done
	{ set +o; shopt -p; } >|"$__rt_dir/opts"
	__rt_ushopt=()
	for __rt_o in "${__rt_toggle_shopt_a[@]}"; do
		shopt -q "$__rt_o" 2>/dev/null && __rt_ushopt+=("$__rt_o")
	done
	((${#__rt_ushopt[@]})) && shopt -u "${__rt_ushopt[@]}"
	local -a __rt_lines
	mapfile -t __rt_lines <"$__rt_dir/opts"
	for __rt_l in "${__rt_lines[@]}"; do
		case $__rt_l in
		"set "[-+]"o "*)
			__rt_o=${__rt_l#set ?o }
			case $__rt_o in
			# driver-managed; verbose lasts only until the end of the execution that set it
			history | monitor | emacs | vi | histexpand | verbose) continue ;;
			pipefail) [[ -n $__rt_upipefail ]] && __rt_l="set -o pipefail" ;;
			posix) [[ -n $__rt_uposix ]] && __rt_l="set -o posix" ;;
			allexport | errexit | nounset | xtrace | noglob | noclobber | errtrace | functrace | keyword)
				# the driver has turned these off: the user's value is in the letters of $-
				case $__rt_o in
				allexport) __rt_x=a ;; errexit) __rt_x=e ;; nounset) __rt_x=u ;; xtrace) __rt_x=x ;;
				noglob) __rt_x=f ;; noclobber) __rt_x=C ;; errtrace) __rt_x=E ;;
				functrace) __rt_x=T ;; keyword) __rt_x=k ;;
				esac
				__rt_l="set +o $__rt_o"
				[[ $__rt_uflags == *"$__rt_x"* ]] && __rt_l="set -o $__rt_o"
				;;
			esac
			case $__rt_o in
			posix) __rt_re+="builtin $__rt_l"$'\n' ;;
			xtrace)
				# last, so that it does not trace the rest of the script
				[[ $__rt_l == "set -o"* ]] && __rt_tail+="builtin $__rt_l"$'\n'
				continue
				;;
			esac
			;;
		"shopt "[-+]?" "*)
			__rt_o=${__rt_l#shopt -? }
			case $__rt_o in
			login_shell | restricted_shell) continue ;;
			extglob | expand_aliases) __rt_re+="builtin $__rt_l"$'\n' ;;
			esac
			;;
		esac
		__rt_out+=$__rt_l$'\n'
	done
	__rt_opts=$__rt_out
	__rt_optstail=$__rt_re$__rt_tail
}

# __rt_pre: the first command on line 1 of every execution's file. Puts the user's options
# back (xtrace last, so that nothing of the driver is traced) and sets $? to the previous
# execution's status, as at a prompt.
__rt_pre() {
	local __rt_f=$__rt_uset
	((${#__rt_ushopt[@]})) && shopt -s "${__rt_ushopt[@]}"
	[[ -n $__rt_upipefail ]] && set -o pipefail
	[[ -n $__rt_uposix ]] && set -o posix
	__rt_inuser=1
	[[ -n $__rt_intr ]] && trap -- "$__rt_dbg" DEBUG # SIGINT came before the code began
	[[ -n $__rt_f ]] && set "-$__rt_f"
	# the user's ERR/DEBUG traps and xtrace last, so that they do not see these commands
	if [[ -n $__rt_utraps && $__rt_uflags == *x* ]]; then
		eval "$__rt_utraps"
		set -x
	elif [[ -n $__rt_utraps ]]; then
		eval "$__rt_utraps"
	elif [[ $__rt_uflags == *x* ]]; then
		set -x
	else
		[[ $__rt_f == *e* ]] || return "$__rt_status"
	fi
}

# __rt_ret, the RETURN trap while an execution's file is sourced, and __rt_post: when that file
# (not a file the code sources, nor a function) returns, they record the user's options and
# traps and switch to the driver's. (`|| :`: no errexit in there. One line, no eval: `set -v`
# echoes the trap's text once, and an eval would undo `trap - ERR` on its way out.)
__rt_post() {
	__rt_inuser=
	__rt_running=
	__rt_capture traps
}
__rt_ret='{ __rt_voff; if [[ ${#BASH_SOURCE[@]} == "$__rt_top" && -n $__rt_running ]]; then trap -p DEBUG >|"$__rt_dir/trap.dbg"; trap - DEBUG; trap -p ERR >|"$__rt_dir/trap.err"; trap - ERR; __rt_post; fi; } 2>/dev/null || :'
# __rt_voff: verbose (set -v) off when the execution's file ends, so that it does not echo the
# driver's trap. (A `set +v` made while bash runs a trap or a sourced file comes undone for the
# echoing of input afterwards, hence one more in __rt_finish, outside them.)
__rt_voff() {
	[[ ${#BASH_SOURCE[@]} == $((__rt_top + 1)) && -n $__rt_running ]] && set +v
	return 0
}
__rt_vclear() { set +v; }


# The SIGINT trap during an execution: stop the code. `return` leaves the sourced file, or the
# user's function it is in; then the DEBUG trap returns from each frame above it at its next
# command. Never acts inside the driver's own functions.
__rt_dbg='if [[ -n $__rt_inuser && ${FUNCNAME[0]-} != __rt_* ]] && ((${#BASH_SOURCE[@]} > __rt_top)); then { return 130; } 2>/dev/null; fi'
__rt_int='__rt_intr=1; if [[ -n $__rt_inuser && ${FUNCNAME[0]-} != __rt_* ]] && ((${#BASH_SOURCE[@]} > __rt_top)); then trap -- "$__rt_dbg" DEBUG; { return 130; } 2>/dev/null; fi'

# __rt_blen STRING: sets __rt_bytes to its length in bytes.
__rt_blen() {
	local LC_ALL=C
	__rt_bytes=${#1}
}

# __rt_readfile FILE: sets __rt_s to its whole content.
__rt_readfile() {
	__rt_s=
	IFS= read -r -d '' __rt_s <"$1"
	return 0
}

# __rt_state: builds the state script in __rt_cur, the names it keeps in __rt_names (variables,
# then functions), the kept variables' `declare -p` lines in __rt_vlines and the functions in
# __rt_fnames. Variables are kept when they are not in the start-up baseline or differ from it;
# baseline variables that are gone are unset. With an argument, the `declare -p` and `declare -F`
# that __rt_unchanged has just written are used.
__rt_state() {
	local __rt_l __rt_n __rt_f __rt_q __rt_s __rt_vars='' __rt_funcs='' __rt_fattr='' __rt_al=''
	local -i __rt_nb=0
	local -A __rt_seen=()
	local -a __rt_lines
	__rt_names=() __rt_vlines=() __rt_fnames=()
	[[ -d $__rt_dir ]] || command mkdir -p -m 700 -- "$__rt_dir"
	[[ -n ${1-} ]] || declare -p >|"$__rt_dir/vars"
	local LC_ALL=C # only after `declare -p`, which would list this local
	mapfile -t __rt_lines <"$__rt_dir/vars"
	for __rt_l in "${__rt_lines[@]}"; do
		__rt_n=${__rt_basel[$__rt_l]-}
		if [[ -n $__rt_n ]]; then # as at start-up
			__rt_nb+=1
			continue
		fi
		[[ $__rt_l == "declare -"* ]] || continue
		__rt_n=${__rt_l#declare -* }
		[[ $__rt_n == __rt_* ]] && continue # (first: the driver's own values are long)
		__rt_n=${__rt_n%%=*}
		[[ -n ${__rt_skip[$__rt_n]-} || $__rt_n == BASH_* || $__rt_n == COMP_* || $__rt_n == RUNTIMECTL_* ]] && continue
		__rt_seen[$__rt_n]=1
		[[ -n ${__rt_basen[$__rt_n]-} ]] && __rt_nb+=1
		__rt_vars+=$__rt_l$'\n'
		__rt_names+=("$__rt_n")
		__rt_vlines+=("$__rt_l")
	done
	if ((__rt_nb < ${#__rt_basenames[@]})); then # some were unset
		for __rt_l in "${__rt_lines[@]}"; do
			__rt_n=${__rt_basel[$__rt_l]-}
			[[ -n $__rt_n ]] && __rt_seen[$__rt_n]=1
		done
		for __rt_n in "${__rt_basenames[@]}"; do
			[[ -n ${__rt_seen[$__rt_n]-} ]] || __rt_vars+="unset -v $__rt_n"$'\n'
		done
	fi
	[[ -n ${1-} ]] || declare -F >|"$__rt_dir/funcs"
	mapfile -t __rt_lines <"$__rt_dir/funcs"
	for __rt_l in "${__rt_lines[@]}"; do
		__rt_n=${__rt_l#declare -* }
		[[ $__rt_n == __rt_* ]] && continue
		__rt_fnames+=("$__rt_n")
		__rt_f=${__rt_l#declare }
		__rt_f=${__rt_f%% *}
		if [[ $__rt_f != -f ]]; then
			printf -v __rt_q '%q' "$__rt_n"
			__rt_fattr+="builtin declare $__rt_f $__rt_q"$'\n'
		fi
	done
	if ((${#__rt_fnames[@]})); then
		declare -f "${__rt_fnames[@]}" >|"$__rt_dir/fdefs"
		__rt_readfile "$__rt_dir/fdefs"
		__rt_funcs=$__rt_s
		[[ $__rt_funcs == *$'\n' ]] || __rt_funcs+=$'\n'
		__rt_names+=("${__rt_fnames[@]}")
	fi
	if ((${#BASH_ALIASES[@]})); then
		alias -p >|"$__rt_dir/aliases"
		__rt_readfile "$__rt_dir/aliases"
		__rt_al=$__rt_s
		[[ $__rt_al == *$'\n' ]] || __rt_al+=$'\n'
	fi
	__rt_cur="# runtimectl bash-state-v1"$'\n'
	if [[ -n ${PWD-} ]]; then
		printf -v __rt_q '%q' "$PWD"
		__rt_cur+="builtin cd -- $__rt_q || __rt_cwd_failed=$__rt_q"$'\n'
	fi
	# Functions last, parsed with the driver's parser settings, then the user's options.
	__rt_cur+=$__rt_vars$__rt_al$__rt_opts
	__rt_cur+="builtin set +o posix"$'\n'"builtin shopt -s extglob"$'\n'"builtin shopt -u expand_aliases"$'\n'
	__rt_cur+=$__rt_funcs$__rt_fattr$__rt_optstail
}

# __rt_prepare_exec: the request in __rt_req is an exec: write its code (from "code_b64",
# base64, when the agent sends it, else "code") to the private file, arm the SIGINT trap.
__rt_prepare_exec() {
	__rt_xid=${__rt_req[id]-}
	__rt_nonce=${__rt_req[nonce]-}
	[[ -d $__rt_dir ]] || command mkdir -p -m 700 -- "$__rt_dir"
	__rt_code=$__rt_dir/exec
	if [[ -n ${__rt_req[code_b64]-} ]]; then
		printf '__rt_pre; ' >|"$__rt_code"
		printf '%s' "${__rt_req[code_b64]}" | command base64 -d >>"$__rt_code" 2>/dev/null
		printf '\n' >>"$__rt_code"
	else
		printf '__rt_pre; %s\n' "${__rt_req[code]-}" >|"$__rt_code"
	fi
	# The execution's own working directory and environment (`exec -w -e`), put back by
	# __rt_finish (the agent checked that the directory exists).
	__rt_undo=
	if [[ -n ${__rt_req[session]-} && ${RUNTIMECTL_SESSION-} != "${__rt_req[session]}" ]]; then
		export RUNTIMECTL_SESSION=${__rt_req[session]} # a claimed pool member: its name from then on
	fi
	if [[ -n ${__rt_req[cwd]-} ]]; then
		__rt_undo="builtin cd -- $(printf '%q' "$PWD") 2>/dev/null; "
		builtin cd -- "${__rt_req[cwd]}" 2>/dev/null || __rt_undo=
	fi
	if [[ -n ${__rt_req[env_b64]-} ]]; then
		local __rt_kv __rt_k
		while IFS= read -r -d '' __rt_kv || [[ -n $__rt_kv ]]; do
			__rt_k=${__rt_kv%%=*}
			[[ $__rt_k == "$__rt_kv" || -z $__rt_k ]] && continue
			if [[ -n ${!__rt_k+set} ]]; then
				__rt_undo+="export $__rt_k=$(printf '%q' "${!__rt_k}"); "
			else
				__rt_undo+="unset $__rt_k; "
			fi
			export "$__rt_kv"
		done < <(printf '%s' "${__rt_req[env_b64]}" | command base64 -d 2>/dev/null)
	fi
	__rt_intr=
	__rt_pending=1
	trap -- "$__rt_int" INT
	return 0
}

# __rt_finish STATUS: the execution has ended: back to the driver's options, then the nonces and
# the done event. With the agent's fingerprint file (__rt_sfd), the state is written there and
# the agent decides "changed" (__rt_fpdone); __rt_finish has no locals, so that what `declare -p`
# shows there is the same after every execution and at start-up.
__rt_finish() {
	[[ -n $__rt_pending ]] || return 0
	__rt_end "$1"
	[[ -n $__rt_done ]] && __rt_fpdone
	return 0
}

# __rt_end STATUS: the work of __rt_finish up to the done event, which it emits (or, with the
# fingerprint file, leaves in __rt_done for __rt_fpdone).
__rt_end() {
	local __rt_rc=$1 __rt_st=ok __rt_err=null __rt_changed=false __rt_i
	if [[ -n $__rt_running ]]; then
		# the RETURN trap did not run (break/continue at the top level, or the code replaced it)
		__rt_running= __rt_inuser=
		{ __rt_capture; } 2>/dev/null
	fi
	set +v # (see __rt_voff)
	if [[ -n ${__rt_undo-} ]]; then
		eval "$__rt_undo"
		__rt_undo=
	fi
	__rt_inuser=
	trap - RETURN DEBUG
	trap '' INT
	__rt_pending=
	if [[ -n $__rt_intr ]]; then
		__rt_st=interrupted
		((__rt_rc == 0)) && __rt_rc=130
		__rt_err="{\"name\":\"ExitStatus\",\"value\":\"$__rt_rc\",\"traceback\":\"\"}"
	elif ((__rt_rc != 0)); then
		__rt_st=error
		__rt_err="{\"name\":\"ExitStatus\",\"value\":\"$__rt_rc\",\"traceback\":\"\"}"
	fi
	__rt_intr=
	__rt_status=$__rt_rc
	# What differs from one execution to the next in the driver's own variables goes into the
	# positional parameters, out of the fingerprint (__rt_unchanged).
	set -- "$__rt_st" "$__rt_err" "$__rt_nonce" "$__rt_xid"
	unset __rt_rc __rt_st __rt_err
	__rt_nonce= __rt_xid= __rt_s= __rt_j= __rt_v= __rt_ch= __rt_line=
	__rt_req=()
	[[ _ =~ _ ]] # BASH_REMATCH held the request
	if [[ -n $__rt_sfd ]]; then
		printf '%s' "$3" >&"$__rt_o"
		printf '%s' "$3" >&"$__rt_e"
		__rt_jstr "$4"
		__rt_done="{\"op\":\"done\",\"id\":$__rt_j,\"status\":\"$1\",\"result\":null,\"error\":$2,\"outputs\":[],\"fingerprint\":true}"
		__rt_j=
		return 0
	fi
	if ! __rt_unchanged; then
		__rt_state dumped
		[[ $__rt_cur == "$__rt_prev" ]] || __rt_changed=true
		__rt_prev=$__rt_cur
		__rt_prev_names=("${__rt_names[@]}")
	fi
	printf '%s' "$3" >&"$__rt_o"
	printf '%s' "$3" >&"$__rt_e"
	__rt_jstr "$4"
	__rt_i=$__rt_j
	__rt_emit "{\"op\":\"done\",\"id\":$__rt_i,\"status\":\"$1\",\"result\":null,\"error\":$2,\"outputs\":[],\"changed\":$__rt_changed}"
}

# The lines of the fingerprint's first part (`declare -p`, up to its first empty line) that the
# agent leaves out of its comparison, by their text before the first `=`: variables that are
# never in a state script (__rt_skipvar) and whose values change by themselves or depend on where
# the driver stands (the dynamic ones print a value once the code has used them); __rt_status is
# the last execution's status; RUNTIMECTL_SESSION changes when a warm pool's member is claimed. Each as bash prints it unless the code gave it other attributes
# (then it only costs a snapshot).
__rt_fpignore=
for __rt_x in RANDOM SRANDOM SECONDS BASHPID EPOCHREALTIME EPOCHSECONDS LINENO HISTCMD BASH_COMMAND BASH_SUBSHELL BASH_ARGV0 _ __rt_status; do
	__rt_fpignore+=",\"declare -- $__rt_x\",\"declare -i $__rt_x\""
done
for __rt_x in FUNCNAME BASH_LINENO BASH_SOURCE BASH_ARGC BASH_ARGV PIPESTATUS GROUPS DIRSTACK; do
	__rt_fpignore+=",\"declare -a $__rt_x\""
done
__rt_fpignore="[${__rt_fpignore#,},\"declare -A BASH_CMDS\",\"declare -x RUNTIMECTL_SESSION\"]"
unset __rt_x

# __rt_fpdone: writes the fingerprint of the state on the agent's file, then emits the event in
# __rt_done (a done or the ready event). The fingerprint is `declare -p`, an empty line, the
# user's functions (`declare -pF`: names and attributes, then `declare -f`) and `alias -p`
# (BASH_ALIASES in `declare -p` can be stale; the user's options are in `declare -p`: the
# driver's record of them). The state script is a function of these, so when they are the same
# (less the lines of __rt_fpignore) so is the script; the agent compares them with the last, and
# the script is built only for a snapshot (__rt_snapshot). The driver's variables that depend on
# the execution are unset first; no locals here or in the callers. Bash makes one write(2) a
# line of these: the fewer lines, the cheaper (hence not `declare -F`, which lists the driver's
# functions too, and unset rather than emptied).
__rt_fpdone() {
	set -- "$__rt_done"
	unset __rt_done __rt_code __rt_cur __rt_prev __rt_bytes __rt_j __rt_s __rt_v __rt_ch __rt_line \
		__rt_nonce __rt_xid __rt_undo __rt_cwd_failed __rt_names __rt_vlines __rt_prev_names __rt_fnames \
		__rt_restored __rt_failed __rt_rfd
	[[ -d $__rt_dir ]] || command mkdir -p -m 700 -- "$__rt_dir"
	[[ _ =~ _ ]]
	: "${#BASH_ALIASES[@]}" # (brings BASH_ALIASES up to date for `declare -p`)
	{
		declare -p
		printf '\n'
		compgen -A function -X '__rt_*' >|"$__rt_dir/fn"
		mapfile -t __rt_fnames <"$__rt_dir/fn"
		((${#__rt_fnames[@]} == 0)) || declare -pF "${__rt_fnames[@]}"
		((${#__rt_fnames[@]} == 0)) || declare -f "${__rt_fnames[@]}"
		((${#BASH_ALIASES[@]} == 0)) || alias -p
	} >&"$__rt_sfd"
	__rt_fnames=()
	__rt_emit "$1"
}

# __rt_unchanged: true when the shell's variables, functions and aliases print exactly as they
# did at the end of the last execution that took this test, so the state script (a function of
# them) is the same and need not be rebuilt: the common execution pays `declare -p`, `declare
# -F`, the user's functions and one string comparison instead of the loop of __rt_state over
# every line. The last
# fingerprint is kept in __rt_fp, out of the shell's variables (in $1) while the new one is
# taken; the caller has emptied what changes in the driver's own variables at every execution.
# A false "changed" only costs the full rebuild, which then compares the state scripts.
__rt_unchanged() {
	[[ -d $__rt_dir ]] || command mkdir -p -m 700 -- "$__rt_dir"
	set -- "${__rt_fp-}"
	unset __rt_fp
	declare -p >|"$__rt_dir/vars"
	declare -F >|"$__rt_dir/funcs"
	# With the same function names as the last state, the user's are __rt_fnames: their bodies
	# (with other names, the names differ already).
	: >|"$__rt_dir/fp"
	((${#__rt_fnames[@]} == 0)) || declare -f "${__rt_fnames[@]}" >>"$__rt_dir/fp"
	((${#BASH_ALIASES[@]} == 0)) || alias -p >>"$__rt_dir/fp"
	# (no NUL in what bash prints: each file in one element)
	mapfile -d '' __rt_fpa <"$__rt_dir/vars"
	mapfile -d '' -O 1 __rt_fpa <"$__rt_dir/funcs"
	mapfile -d '' -O 2 __rt_fpa <"$__rt_dir/fp"
	__rt_fp="${__rt_fpa[0]-}|${__rt_fpa[1]-}|${__rt_fpa[2]-}"
	unset __rt_fpa
	[[ -n $1 && $__rt_fp == "$1" ]]
}

# __rt_snapshot ID: the state as of the last execution, inline on fd 5.
__rt_snapshot() {
	local __rt_i __rt_m __rt_dn __rt_mn
	__rt_jstr "$1"
	__rt_i=$__rt_j
	__rt_emit "{\"op\":\"snapshot_started\",\"id\":$__rt_i,\"pid\":$$}"
	if [[ -n $__rt_sfd ]]; then # (the state as of the last execution: nothing ran since)
		__rt_state
		__rt_prev=$__rt_cur
		__rt_prev_names=("${__rt_names[@]}")
	fi
	__rt_jlist "${__rt_prev_names[@]}"
	__rt_m="{\"id\":$__rt_i,\"ok\":true,\"error\":null,\"format\":\"bash-state-v1\",\"kept\":$__rt_j,\"skipped\":[],\"info\":{\"interpreter\":\"$__rt_interp\"}}"
	__rt_blen "$__rt_prev"
	__rt_dn=$__rt_bytes
	__rt_blen "$__rt_m"
	__rt_mn=$__rt_bytes
	printf '%d\n%s0\n%d\n%s' "$__rt_dn" "$__rt_prev" "$__rt_mn" "$__rt_m" >&5
}

# __rt_vars ID: the user's variables and functions.
__rt_vars() {
	local __rt_i __rt_l __rt_n __rt_f __rt_t __rt_v __rt_len __rt_a='' __rt_k
	__rt_jstr "$1"
	__rt_i=$__rt_j
	__rt_state
	for ((__rt_k = 0; __rt_k < ${#__rt_vlines[@]}; __rt_k++)); do
		__rt_l=${__rt_vlines[__rt_k]}
		__rt_n=${__rt_names[__rt_k]}
		__rt_f=${__rt_l#declare -}
		__rt_f=${__rt_f%% *}
		case $__rt_f in
		*a*) __rt_t=array ;;
		*A*) __rt_t=assoc ;;
		*i*) __rt_t=integer ;;
		*) __rt_t=string ;;
		esac
		if [[ $__rt_t == array || $__rt_t == assoc ]]; then
			local -n __rt_r=$__rt_n
			__rt_len=${#__rt_r[@]}
			unset -n __rt_r
			__rt_v=
			[[ $__rt_l == *=* ]] && __rt_v=${__rt_l#*=}
		elif [[ $__rt_f == *n* ]]; then
			__rt_v=${__rt_l#*=}
			__rt_v=${__rt_v#\"}
			__rt_v=${__rt_v%\"}
			__rt_len=${#__rt_v}
		else
			__rt_v=${!__rt_n-}
			__rt_len=${#__rt_v}
		fi
		__rt_blen "$__rt_v"
		__rt_jstr "$__rt_n"
		__rt_a+="${__rt_a:+,}{\"name\":$__rt_j,\"type\":\"$__rt_t\",\"len\":$__rt_len,\"size\":$__rt_bytes"
		__rt_jstr "${__rt_v:0:80}"
		__rt_a+=",\"preview\":$__rt_j}"
	done
	for __rt_n in "${__rt_fnames[@]}"; do
		declare -f "$__rt_n" >|"$__rt_dir/fdef"
		__rt_readfile "$__rt_dir/fdef"
		__rt_v=$__rt_s
		__rt_jstr "$__rt_n"
		__rt_a+="${__rt_a:+,}{\"name\":$__rt_j,\"type\":\"function\""
		__rt_blen "$__rt_v"
		__rt_a+=",\"size\":$__rt_bytes"
		__rt_jstr "${__rt_v:0:80}"
		__rt_a+=",\"preview\":$__rt_j}"
	done
	__rt_emit "{\"op\":\"vars\",\"id\":$__rt_i,\"vars\":[$__rt_a],\"modules\":[],\"private\":[]}"
}

# __rt_next: answers requests until an exec arrives (then returns, with its code ready to run).
# Ends the process at the end of fd 3.
__rt_next() {
	local __rt_line __rt_op __rt_i
	[[ -n $__rt_pending ]] && __rt_finish 0 # `continue` at the top level of the code
	while :; do
		trap '' INT
		__rt_line=
		if ! IFS= read -r __rt_line <&3; then
			[[ -n $__rt_line ]] || exit 0
		fi
		[[ $__rt_line == *[![:space:]]* ]] || continue
		if [[ $__rt_line =~ $__rt_re_exec ]]; then
			# the agent's usual exec request, parsed by one regex (see __rt_re_exec)
			__rt_req=([op]=exec [id]="${BASH_REMATCH[1]}" [nonce]="${BASH_REMATCH[5]}" [seq]="${BASH_REMATCH[2]}")
			[[ -n ${BASH_REMATCH[7]} ]] && __rt_req[session]=${BASH_REMATCH[8]}
			__rt_s=${BASH_REMATCH[3]}
			if [[ $__rt_s == *"\\"* ]]; then
				__rt_s=${__rt_s//"\\\\"/$'\xfe'}
				__rt_s=${__rt_s//"\\\""/$'\xff'}
				__rt_jdecode "$__rt_s"
				__rt_s=$__rt_v
			fi
			__rt_req[code]=$__rt_s
			__rt_s=
		elif ! __rt_parse "$__rt_line"; then
			__rt_jstr "malformed request: ${__rt_line:0:200}"
			__rt_emit "{\"op\":\"error\",\"id\":\"\",\"error\":$__rt_j}"
			continue
		fi
		__rt_op=${__rt_req[op]-}
		case $__rt_op in
		exec) __rt_prepare_exec && return 0 ;;
		snapshot) __rt_snapshot "${__rt_req[id]-}" ;;
		vars) __rt_vars "${__rt_req[id]-}" ;;
		*)
			__rt_jstr "${__rt_req[id]-}"
			__rt_i=$__rt_j
			__rt_jstr "unknown op $__rt_op"
			__rt_emit "{\"op\":\"error\",\"id\":$__rt_i,\"error\":$__rt_j}"
			;;
		esac
	done
}

# __rt_setup: private directory, the variable baseline, the initial options.
__rt_setup() {
	local __rt_l __rt_n
	local -a __rt_lines
	__rt_dir=$(command mktemp -d "${TMPDIR:-/tmp}/runtimectl-bash.XXXXXXXX") || __rt_dir=/tmp/runtimectl-bash.$$
	[[ -d $__rt_dir ]] || command mkdir -p -m 700 -- "$__rt_dir"
	__rt_interp="bash ${BASH_VERSINFO[0]}.${BASH_VERSINFO[1]}.${BASH_VERSINFO[2]}"
	__rt_status=0 __rt_optkey= __rt_utraps= __rt_pending= __rt_running= __rt_inuser= __rt_intr= __rt_cwd_failed=
	__rt_prev= __rt_prev_names=() __rt_names=() __rt_vlines=() __rt_fnames=()
	__rt_xid= __rt_nonce= __rt_code= __rt_j= __rt_v= __rt_ch= __rt_s= __rt_bytes=0 __rt_cur= __rt_done=
	__rt_line= __rt_undo=
	declare -gA __rt_req=() __rt_basel=() __rt_basen=()
	__rt_basenames=()
	declare -p >|"$__rt_dir/vars"
	mapfile -t __rt_lines <"$__rt_dir/vars"
	for __rt_l in "${__rt_lines[@]}"; do
		[[ $__rt_l == "declare -"* ]] || continue
		__rt_n=${__rt_l#declare -* }
		__rt_n=${__rt_n%%=*}
		__rt_skipvar "$__rt_n" && continue
		__rt_basel[$__rt_l]=$__rt_n
		__rt_basen[$__rt_n]=1
		__rt_basenames+=("$__rt_n")
	done
	{ __rt_capture; } 2>/dev/null
}

# __rt_ready: the ready event, after an optional restore.
__rt_ready() {
	local __rt_r __rt_f='' __rt_l
	local -a __rt_lines
	__rt_jlist "${__rt_restored[@]}"
	__rt_r=$__rt_j
	for __rt_l in "${__rt_failed[@]}"; do
		__rt_f+=${__rt_f:+,}$__rt_l
	done
	__rt_done="{\"op\":\"ready\",\"pid\":$$,\"restored\":$__rt_r,\"failed\":[$__rt_f],\"info\":{\"interpreter\":\"$__rt_interp\"}"
	if [[ -n $__rt_sfd ]]; then
		__rt_done+=",\"fingerprint_ignore\":$__rt_fpignore}"
	else
		__rt_emit "$__rt_done}"
		__rt_done=
	fi
}

# __rt_failure NAME TYPE REASON: appends a `failed` entry.
__rt_failure() {
	local __rt_a
	__rt_jstr "$1"
	__rt_a="{\"name\":$__rt_j"
	__rt_jstr "$2"
	__rt_a+=",\"type\":$__rt_j"
	__rt_jstr "$3"
	__rt_failed+=("$__rt_a,\"reason\":$__rt_j}")
}

# ---- start-up (skipped when this file is sourced again to re-enter the loop) ---------------
__rt_top=${#BASH_SOURCE[@]}
if [[ -z ${__rt_inited-} ]]; then
	exec {__rt_o}>&1 {__rt_e}>&2 # private copies of stdout/stderr, for the nonces
	# The agent's fingerprint file (docs/kernel-protocol.md), on a private fd; without it the
	# driver decides "changed" itself (__rt_unchanged).
	__rt_sfd=
	if [[ ${RUNTIMECTL_STATE_FD-} == [0-9]* ]] && { true >&"$RUNTIMECTL_STATE_FD"; } 2>/dev/null; then
		exec {__rt_sfd}>&"$RUNTIMECTL_STATE_FD"
		exec {RUNTIMECTL_STATE_FD}>&-
	fi
	unset RUNTIMECTL_STATE_FD
	__rt_sfc=${__rt_sfd:-$__rt_e} # what the code runs without (closing __rt_e twice is harmless)
	__rt_setup 2>/dev/null
	__rt_restored=() __rt_failed=()
	if [[ -n ${RUNTIMECTL_RESTORE_FD-} ]]; then
		__rt_rfd=$RUNTIMECTL_RESTORE_FD
		unset RUNTIMECTL_RESTORE_FD
		__rt_s=
		if [[ $__rt_rfd == [0-9]* ]]; then
			IFS= read -r -d '' __rt_s <&"$__rt_rfd"
			exec {__rt_rfd}<&-
		fi
		if [[ $__rt_s == "# runtimectl bash-state-v1"$'\n'* ]]; then
			printf '%s' "$__rt_s" >|"$__rt_dir/restore"
			__rt_s=
			__rt_running=1
			trap -- "$__rt_ret" RETURN
			builtin source "$__rt_dir/restore" 3<&- 4>&- 5>&- 6<&- {__rt_o}>&- {__rt_e}>&- {__rt_sfc}>&- </dev/null >/dev/null 2>"$__rt_dir/restore.err"
			trap - RETURN
			if [[ -n $__rt_running ]]; then
				__rt_running=
				{ __rt_capture; } 2>/dev/null
			fi
			__rt_vclear
			__rt_state
			__rt_restored=("${__rt_names[@]}")
			if [[ -n $__rt_cwd_failed ]]; then
				__rt_failure cwd directory "cannot change to $__rt_cwd_failed"
				__rt_cwd_failed=
			fi
			mapfile -t __rt_lines <"$__rt_dir/restore.err"
			for __rt_l in "${__rt_lines[@]}"; do
				[[ $__rt_l == "bash: "* && $__rt_l != *": cd: "* ]] && __rt_failure "(restore)" bash "${__rt_l#bash: }"
			done
			unset __rt_lines __rt_l
		else
			__rt_failure "(snapshot)" bash-state-v1 "not a bash-state-v1 script"
		fi
	fi
	if [[ -z $__rt_sfd ]]; then
		__rt_state
		__rt_prev=$__rt_cur
		__rt_prev_names=("${__rt_names[@]}")
	fi
	__rt_inited=1
	__rt_ready
	[[ -n $__rt_done ]] && __rt_fpdone 2>/dev/null
fi

# ---- the loop: the code runs here, at the top level ------------------------------------------
# The two loops and the `source` of this file at the end catch `break` and `continue` typed at
# the top level of the code, which would otherwise leave the driver's own loop.
while :; do
	while :; do
		__rt_next 2>/dev/null
		__rt_running=1
		trap -- "$__rt_ret" RETURN
		builtin source "$__rt_code" 3<&- 4>&- 5>&- 6<&- {__rt_o}>&- {__rt_e}>&- {__rt_sfc}>&- </dev/null
		__rt_finish "$?" 2>/dev/null
	done
	__rt_finish 0 2>/dev/null
done
__rt_finish 0 2>/dev/null
builtin source "${BASH_SOURCE[0]}"
