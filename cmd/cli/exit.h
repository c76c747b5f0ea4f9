/*
 * exit.h - attnrun's exit statuses (docs/safety.md, "Exit status"), which every
 * command and the benchmark's programs share.
 */
#ifndef ATTN_CMD_EXIT_H
#define ATTN_CMD_EXIT_H

enum exit_code {
    EXIT_OK = 0,          /* success                                        */
    EXIT_RUNTIME = 1,     /* runtime or I/O failure, interrupted            */
    EXIT_USAGE = 2,       /* usage error                                    */
    EXIT_INPUT = 3,       /* input rejected                                 */
    EXIT_EXPECT = 4       /* results differ from --expect's reference       */
};

#endif
