#!/bin/sh
# tests/lib/one_bit_off.sh ARGS...: an attnrun whose output differs from
# $ATTNRUN's in one bit of one number: runs $ATTNRUN ARGS, then flips the
# lowest bit of the first value of each dataset called weights in the file
# after -o (tests/ref/one_bit_off.py). For tests/cli/test_compare.sh; needs
# ATTNRUN and PY in the environment.
"$ATTNRUN" "$@" || exit
while [ $# -gt 1 ] && [ "$1" != -o ]; do shift; done
exec "$PY" "$(dirname "$0")/../ref/one_bit_off.py" "$2" weights
