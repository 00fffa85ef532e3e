# Sourced by scripts/test.sh and scripts/demo.sh: the interpreter that makes .venv.
#
# $PYTHON when set. Else the distribution's /usr/bin/python3 when it is 3.11 or
# newer and can make a venv with pip: Debian's is built with profile-guided
# optimisation and LTO, libpython linked into the executable.
# An interpreter built from source with the defaults (pyenv, python-build) has
# neither and loads a shared libpython: on this project's 2-core machine the
# 2,000-host benchmark spent ~12 % more CPU a page on pyenv's 3.11.7 than on
# Debian's 3.11.2, the same code (bench/RESULTS.md, issue 14, session 40).
# Else python3 on PATH. Candidates other than /usr/bin/python3 may be given.
venv_python() {
  if [ -n "${PYTHON:-}" ]; then
    printf '%s\n' "$PYTHON"
    return
  fi
  local candidate
  for candidate in "${@:-/usr/bin/python3}"; do
    if [ -x "$candidate" ] && "$candidate" -c \
        'import sys, ensurepip, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      printf '%s\n' "$candidate"
      return
    fi
  done
  printf '%s\n' python3
}
