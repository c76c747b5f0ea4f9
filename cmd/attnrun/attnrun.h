/*
 * attnrun.h - the run command: `attnrun [OPTIONS] IN.h5 (-o OUT.h5 |
 * --in-place)`, the program's own command (cmd/main.c hands it every
 * command line that names no subcommand).
 */
#ifndef ATTN_CMD_ATTNRUN_H
#define ATTN_CMD_ATTNRUN_H

/* Runs attention as the command line asks (argv[0] is the program);
 * under MPI every rank calls it.  Returns the exit status. */
int attnrun_main(int argc, char **argv);

#endif
