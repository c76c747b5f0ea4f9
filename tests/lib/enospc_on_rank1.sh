#!/bin/sh
# tests/lib/enospc_on_rank1.sh COMMAND...: runs COMMAND; on MPI rank 1 under
# strace, which makes its pwritev and pwrite64 calls fail with ENOSPC from
# the third on (tests/cli/test_mpi.sh: a write failing on one rank only).
if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then
    exec strace -f -qq -o /dev/null -e trace=pwritev,pwrite64 \
        -e inject=pwritev,pwrite64:error=ENOSPC:when=3+ "$@"
fi
exec "$@"
