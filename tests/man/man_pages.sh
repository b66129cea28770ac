#!/bin/sh
# The man pages (issue 19 item 23): man/tasker.1 and man/tasker.toml.5 are
# written by hand in mdoc, so this test keeps them true to the binary:
# - `mandoc -T lint` finds nothing at warning level or above, and man-db's
#   `man --warnings -l` renders each without a warning, with its sections,
#   in 80 columns;
# - every command and subcommand `tasker --help` and `tasker COMMAND --help`
#   list has an entry under COMMANDS, and every command there exists; every
#   flag a command's help lists is in one of its entries (or is a global
#   option under OPTIONS);
# - every configuration key the binary knows (asked table by table, through
#   the "unknown key ... (known keys: ...)" message of `config check`) is
#   under its table in KEYS with the default `config show` prints, and
#   every key there is known;
# - `make install-man PREFIX=DIR` (which `make install` runs) puts them in
#   DIR/share/man/man1 and man5, where `man -M` finds them by name.
# mandoc and man-db come with `make server-deps` (run by `make test`).
. "$(dirname "$0")/../lib/tap.sh"
W=$TMPDIR_TEST
TOP=${TK_TOP:-$(cd "$(dirname "$0")/../.." && pwd)}
PAGE1=$TOP/man/tasker.1
PAGE5=$TOP/man/tasker.toml.5
unset TASKER_ENV TASKER_DB

for tool in mandoc man; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    tap_fail "$tool installed" "no $tool; run: make server-deps (Debian packages mandoc, man-db)"
    tap_done
    exit 1
  fi
done

# --- lint and render -------------------------------------------------------

# renders NAME FILE: man-db renders FILE (as `man -l` shows it) with no
# warning, something to read, and no line wider than the 80 columns asked
# for (a literal display that overflows them); the text is left in $OUT.
# (The C locale renders in ASCII, so awk counts columns.)
renders() {
  run env LC_ALL=C MANWIDTH=80 man --warnings -l "$2"
  wide=$(printf '%s\n' "$OUT" | awk 'length > 80')
  if [ "$RC" -eq 0 ] && [ -z "$ERR" ] && [ -n "$OUT" ] && [ -z "$wide" ]; then tap_ok "$1"
  else tap_fail "$1" "exit $RC" "stderr: $ERR" "lines wider than 80 columns:" "$wide"; fi
}

for page in "$PAGE1" "$PAGE5"; do
  name=${page##*/}
  # Messages go to stdout; stderr only says mandoc.db lacks pages that
  # .Xr names, which depends on what this machine has installed.
  run mandoc -T lint -W warning "$page"
  if [ "$RC" -eq 0 ] && [ -z "$OUT" ]; then tap_ok "$name: mandoc -T lint -W warning is quiet"
  else tap_fail "$name: mandoc -T lint -W warning is quiet" "exit $RC" "$OUT"; fi

  renders "$name: man --warnings -l renders it quietly in 80 columns" "$page"
  printf '%s\n' "$OUT" >"$W/$name.txt"
done

# check_sections NAME FILE SECTION...: the rendered page has these section
# headings, in this order.
check_sections() {
  name=$1 file=$2
  shift 2
  want=$(printf '%s\n' "$@")
  got=$(grep -E '^[A-Z][A-Z ]*$' "$file" | grep -Fx "$want")
  expect_eq "$name: sections $*" "$got" "$want"
}
check_sections tasker.1 "$W/tasker.1.txt" NAME SYNOPSIS DESCRIPTION OPTIONS COMMANDS \
  ENVIRONMENT FILES "EXIT STATUS" EXAMPLES "SEE ALSO"
check_sections tasker.toml.5 "$W/tasker.toml.5.txt" NAME SYNOPSIS DESCRIPTION KEYS \
  ENVIRONMENT FILES EXAMPLES DIAGNOSTICS "SEE ALSO"

run "$TASKER" --version
expect_match "tasker.1: .Os names the binary's version ($OUT)" "$(grep '^\.Os ' "$PAGE1")" "$OUT"
expect_match "tasker.toml.5: .Os names the binary's version ($OUT)" "$(grep '^\.Os ' "$PAGE5")" "$OUT"

# --- tasker(1) against the binary ----------------------------------------

# The entries of the COMMANDS section, one line each: the command(s) an
# entry is for, a tab, its head (.It ... or .It Xo ... .Xc joined) and its
# text. `retry | resolve | cancel` is an entry for each of the three.
awk '
  function flush(   n, i, t, names, k) {
    if (head == "") return
    n = split(head, t, " ")
    for (i = 1; i <= n && t[i] != "Cm"; i++) ;
    # The words after the first Cm up to the next macro: a command and its
    # subcommand, or alternatives separated by |.
    names = ""; k = 0
    for (i++; i <= n && t[i] !~ /^[A-Z][a-z]$/; i++) {
      if (t[i] == "|") { alt = 1; continue }
      w[++k] = t[i]
    }
    if (alt) for (i = 1; i <= k; i++) print w[i] "\t" head "\t" body
    else if (k > 0) print w[1] "\t" head "\t" body
    head = ""; body = ""; alt = 0
  }
  /^\.Sh / { flush(); insec = ($0 == ".Sh COMMANDS"); depth = 0; next }
  !insec { next }
  /^\.Bl/ { depth++; if (depth > 1) body = body " " $0; next }
  /^\.El/ { depth--; if (depth > 0) body = body " " $0; next }
  depth == 1 && /^\.It/ {
    flush(); head = substr($0, 2); inxo = ($0 ~ /^\.It Xo/); next
  }
  inxo { if ($0 ~ /^\.Xc/) inxo = 0; else head = head " " substr($0, 2); next }
  head != "" { body = body " " $0 }
  END { flush() }
' "$PAGE1" >"$W/entries"

"$TASKER" --help >"$W/help"
awk '/^Commands:/ { on = 1; next } /^$/ { on = 0 } on { print $1 }' "$W/help" | sort -u >"$W/commands"
cut -f1 "$W/entries" | sort -u >"$W/man_commands"
expect_eq "tasker --help lists commands (parsed)" "$(test -s "$W/commands" && echo yes)" yes
expect_eq "tasker.1 has an entry for every command of tasker --help" \
  "$(comm -23 "$W/commands" "$W/man_commands" | tr '\n' ' ')" ""
expect_eq "every command of tasker.1 is one tasker --help lists" \
  "$(comm -13 "$W/commands" "$W/man_commands" | tr '\n' ' ')" ""

# Global options: each in OPTIONS as `.It Fl -NAME` (mdoc's Fl writes one
# dash itself: `Fl -db` is --db).
globals=$(awk '/^Global options/ { on = 1; next } on' "$W/help" | grep -oE -- '--[a-z][a-z-]*' | sort -u)
options=$(awk '/^\.Sh / { on = ($0 == ".Sh OPTIONS") } on' "$PAGE1")
missing=""
for f in $globals; do
  printf '%s\n' "$options" | grep -qE "^\.It Fl ${f#-}( |$)" || missing="$missing $f"
done
expect_eq "tasker.1 OPTIONS has every global option of tasker --help ($(echo $globals))" "$missing" ""

# Per command: its subcommands (a lower-case word after the command on a
# usage line) are in one of its entries' heads as `Cm COMMAND SUB` or
# `Cm SUB`, and each flag of its help is
# in one of its entries, or is a global option.
missing_sub=""
missing_flag=""
for c in $(cat "$W/commands"); do
  "$TASKER" "$c" --help >"$W/help_$c" 2>&1
  grep "^$c	" "$W/entries" | cut -f2 >"$W/heads_$c"
  grep "^$c	" "$W/entries" >"$W/text_$c"
  subs=$(sed -n "s/^\(usage: \)\{0,1\} *tasker $c \[\{0,1\}\([a-z][a-z_-]*\)\]\{0,1\}\( .*\)\{0,1\}$/\2/p" "$W/help_$c")
  for s in $subs; do
    grep -qE -- "Cm ($c )?$s( |$)" "$W/heads_$c" || missing_sub="$missing_sub $c/$s"
  done
  for f in $(grep -oE -- '--[a-z][a-z-]*' "$W/help_$c" | sort -u); do
    grep -qE "Fl ${f#-}([^a-z-]|$)" "$W/text_$c" && continue
    printf '%s\n' "$globals" | grep -qx -- "$f" && continue
    missing_flag="$missing_flag $c:$f"
  done
done
expect_eq "tasker.1 has every subcommand of each command's usage" "$missing_sub" ""
expect_eq "tasker.1 has every flag of each command's --help in its entry" "$missing_flag" ""

# --- tasker.toml(5) against the binary ------------------------------------

# probe PATH: what `config check` says of a table PATH holding an unknown
# key: the keys it knows (one per line), "TABLES" for a table of named
# tables, or nothing for a value that is not a table.
probe() {
  if [ -z "$1" ]; then printf 'zzz = 1\n' >"$W/probe.toml"
  # A named table is probed as "name": a queue's name is lower case.
  else printf '[%s]\nzzz = 1\n' "$(printf '%s' "$1" | sed 's/NAME/name/g')" >"$W/probe.toml"; fi
  msg=$("$TASKER" --env '' config check "$W/probe.toml" 2>&1 | head -n 1)
  case "$msg" in
  *'unknown key'*'(known keys: '*) printf '%s\n' "${msg##*known keys: }" ;;
  *'unknown key'*'(expected '*) printf '%s\n' "${msg##*(expected }" ;;
  *'expected a table'*) echo TABLES; return ;;
  *) return ;;
  esac | tr -d ')' | tr ',' '\n' | tr -d ' '
}
# walk PATH: print every key below PATH as its dotted path; the name of a
# named table ([budgets.NAME]) is written NAME.
walk() {
  for k in $(probe "$1"); do
    if [ "$k" = TABLES ]; then walk "$1.NAME"; continue; fi
    p=${1:+$1.}$k
    sub=$(probe "$p")
    if [ -n "$sub" ]; then walk "$p"; else echo "$p"; fi
  done
}
walk "" | sort -u >"$W/known_keys"
expect_eq "config check names the configuration's keys (parsed)" \
  "$(grep -c . "$W/known_keys" | awk '$1 >= 30 { print "yes" }')" yes

# The KEYS section as TABLE.KEY<tab>VALUE, from `.Ss [TABLE]...` headings and
# `.It Ic KEY Li = VALUE` items (VALUE unescaped).
sed -e 's/\\&//g' -e 's/\\(dq/"/g' "$PAGE5" | awk '
  /^\.Sh / { on = ($0 == ".Sh KEYS"); next }
  !on { next }
  /^\.Ss \[/ { t = $2; sub(/^\[/, "", t); sub(/\].*$/, "", t); next }
  /^\.It Ic / {
    v = $0; sub(/^\.It Ic [^ ]* Li = /, "", v)
    print t "." $3 "\t" v
  }' | sort >"$W/man_keys"
grep -E '^\.Ss \[' "$PAGE5" | sed -e 's/\\&//g' -e 's/^\.Ss \[//' -e 's/\].*$//' >"$W/man_tables"

# A profile has exactly [backoff]'s keys, and the page says so under its
# heading instead of listing them again.
missing=""
while read -r k; do
  case "$k" in
  backoff.profiles.NAME.*)
    grep -qx backoff.profiles.NAME "$W/man_tables" || missing="$missing [backoff.profiles.NAME]"
    k=backoff.${k#backoff.profiles.NAME.} ;;
  esac
  cut -f1 "$W/man_keys" | grep -qxF "$k" || missing="$missing $k"
done <"$W/known_keys"
expect_eq "tasker.toml.5 has every key the binary knows, under its table" \
  "$(printf '%s\n' $missing | sort -u | tr '\n' ' ' | sed 's/ $//')" ""
unknown=$(cut -f1 "$W/man_keys" | while read -r k; do
  grep -qxF "$k" "$W/known_keys" || printf ' %s' "$k"
done)
expect_eq "every key of tasker.toml.5 is one the binary knows" "$unknown" ""

# The defaults, as `config show` prints them; a budget and a profile are
# configured so that their keys are shown too.
printf '[budgets.NAME]\n[backoff.profiles.NAME]\n' >"$W/defaults.toml"
"$TASKER" --config "$W/defaults.toml" --env '' config show >"$W/show"
sed -n 's/^\([^ ]*\) = \(.*[^ ]\) *# default$/\1	\2/p' "$W/show" | sort >"$W/defaults"
expect_eq "config show prints defaults (parsed)" \
  "$(grep -c . "$W/defaults" | awk '$1 >= 30 { print "yes" }')" yes
wrong=""
while IFS='	' read -r k v; do
  mv=$(grep "^$k	" "$W/man_keys" | cut -f2)
  [ "$mv" = "$v" ] || wrong="$wrong $k=$v(page: ${mv:-none})"
done <"$W/defaults"
expect_eq "tasker.toml.5 shows each key's built-in default as config show prints it" "$wrong" ""

# --- make install ----------------------------------------------------------

P=$W/prefix
run env -u BUILD -u MODE -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s --no-print-directory -C "$TOP" install-man PREFIX="$P" DESTDIR=
expect_rc "make install-man PREFIX=DIR" 0
for f in man1/tasker.1 man5/tasker.toml.5; do
  if cmp -s "$P/share/man/$f" "$TOP/man/${f#*/}"; then tap_ok "installed as share/man/$f"
  else tap_fail "installed as share/man/$f" "$(ls -lR "$P" 2>&1)"; fi
done
run man -M "$P/share/man" -w 1 tasker
expect_eq "man -M PREFIX/share/man finds tasker(1)" "$OUT" "$P/share/man/man1/tasker.1"
run man -M "$P/share/man" -w 5 tasker.toml
expect_eq "man -M PREFIX/share/man finds tasker.toml(5)" "$OUT" "$P/share/man/man5/tasker.toml.5"
for f in man1/tasker.1 man5/tasker.toml.5; do
  renders "installed $f renders without warnings in 80 columns" "$P/share/man/$f"
done
# `make install` itself installs them: its dry run goes through install-man.
run env -u BUILD -u MODE -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -n --no-print-directory -C "$TOP" install PREFIX="$P" DESTDIR=
expect_match "make install runs install-man" "$OUT" "install -m 644 man/tasker.toml.5 $P/share/man/man5/"

tap_done
