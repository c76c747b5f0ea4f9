/* cli.c - the ends of attnrun's command lines (cli.h). */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int cli_exit_code(int status)
{
    switch (status) {
    case ATTN_OK:     return EXIT_OK;
    case ATTN_EUSAGE: return EXIT_USAGE;
    case ATTN_EINPUT: return EXIT_INPUT;
    default:          return EXIT_RUNTIME;
    }
}

int cli_finish_stdout(int code)
{
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout) || fclose(stdout) != 0) {
        if (code == EXIT_OK) {
            fprintf(stderr, "attnrun: cannot write to standard output: %s\n",
                    errno != 0 ? strerror(errno) : "a write failed");
            return EXIT_RUNTIME;
        }
    }
    return code;
}
