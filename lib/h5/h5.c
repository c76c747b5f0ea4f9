/*
 * h5.c - what every file of the h5 layer uses: HDF5 set up once (errors as
 * values, no plugins unless allowed), HDF5's reason for a failure, the
 * file-locking switch HDF5 reads, and the closing of a set of HDF5 ids.
 */
#include "h5/h5.h"

#include "h5/close.h"

#include "core/core.h"

#include <hdf5.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Dynamic filter plugins: off unless attn_h5_allow_plugins. */
static bool plugins_allowed;

bool h5_plugins_allowed(void)
{
    return plugins_allowed;
}

/* What attn_h5_error_detail collects while walking HDF5's error stack. */
typedef struct error_detail {
    char *buf;
    size_t len;
    bool system;        /* buf holds the system's words: stop looking */
} error_detail;

/* Walked from the innermost error outwards: keeps the system's message
 * ("No space left on device") when one is there, else the innermost
 * non-empty description. */
static herr_t keep_detail(unsigned depth, const H5E_error2_t *e, void *data)
{
    error_detail *d = data;
    const char *marker = "error message = '";
    (void)depth;
    if (d->system || e->desc == NULL || e->desc[0] == '\0')
        return 0;
    const char *sys = strstr(e->desc, marker);
    if (sys != NULL) {
        sys += strlen(marker);
        snprintf(d->buf, d->len, "%.*s", (int)strcspn(sys, "'"), sys);
        d->system = true;
    } else if (d->buf[0] == '\0') {
        snprintf(d->buf, d->len, "%s", e->desc);
    }
    return 0;
}

bool attn_h5_locking_disabled(bool *best_effort)
{
    const char *value = getenv("HDF5_USE_FILE_LOCKING");
    *best_effort = value != NULL && strcmp(value, "BEST_EFFORT") == 0;
    return value != NULL && (strcmp(value, "FALSE") == 0 || strcmp(value, "0") == 0);
}

void attn_h5_prepare(void)
{
    /* Before HDF5 initialises: no exit-time clean-up.  After an output
     * file failed to flush (disk full), HDF5 1.10 keeps it half-closed and
     * its atexit handler crashes closing it again; the process is ending
     * anyway, and the operating system reclaims the memory. */
    static bool prepared;
    if (prepared)
        return;
    prepared = true;
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);   /* errors come back as values */
    /* No code is loaded because a file names a filter: HDF5_PLUGIN_PATH
     * would otherwise let any input pull a shared library in. */
    H5PLset_loading_state(plugins_allowed ? H5PL_ALL_PLUGIN : 0);
}

void attn_h5_allow_plugins(bool allow)
{
    plugins_allowed = allow;
    H5PLset_loading_state(allow ? H5PL_ALL_PLUGIN : 0);
}

char *attn_h5_error_detail(char *buf, size_t len)
{
    error_detail detail = {.buf = buf, .len = len};
    if (len == 0)
        return buf;
    buf[0] = '\0';
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, keep_detail, &detail);
    if (buf[0] == '\0')
        snprintf(buf, len, "HDF5 gave no reason");
    return buf;
}

bool h5_system_error(char *buf, size_t len)
{
    error_detail detail = {.buf = buf, .len = len};
    if (len == 0)
        return false;
    buf[0] = '\0';
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, keep_detail, &detail);
    return detail.system;
}

int h5_is_hdf5(const char *path, const char *what, attn_error *err)
{
    char detail[256];
    /* HDF5 opens the file by name: a descriptor must be left for it, and
     * the file readable; open() says which it is not, with its reason */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return attn_fail(err, attn_open_status(errno), "%s: cannot read %s: %s", path, what,
                         strerror(errno));
    close(fd);
    htri_t is = H5Fis_hdf5(path);
    bool system = is < 0 && h5_system_error(detail, sizeof detail);
    H5Eclear2(H5E_DEFAULT);
    if (system)
        return attn_fail(err, ATTN_EIO, "%s: cannot read %s: %s", path, what, detail);
    return is > 0;
}

void h5_close_ids(const hid_t *ids, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        if (ids[i] < 0)
            continue;
        switch (H5Iget_type(ids[i])) {
        case H5I_FILE: H5Fclose(ids[i]); break;
        case H5I_GROUP: H5Gclose(ids[i]); break;
        case H5I_DATASET: H5Dclose(ids[i]); break;
        case H5I_ATTR: H5Aclose(ids[i]); break;
        case H5I_DATASPACE: H5Sclose(ids[i]); break;
        case H5I_DATATYPE: H5Tclose(ids[i]); break;
        case H5I_GENPROP_LST: H5Pclose(ids[i]); break;
        default: H5Idec_ref(ids[i]); break;
        }
    }
}
