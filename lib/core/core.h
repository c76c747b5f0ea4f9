/*
 * core.h - what the core layer offers libattn's higher layers and no
 * program: the marks around HDF5's parsing of a file libattn reads, which
 * attn_parsing_file() reports.
 *
 *     attn_parsing_enter();
 *     hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
 *     attn_parsing_leave();
 */
#ifndef ATTN_CORE_H
#define ATTN_CORE_H

/* Marks the start and the end of HDF5 calls that parse a file libattn
 * reads and did not make; they nest. */
void attn_parsing_enter(void);
void attn_parsing_leave(void);

/*
 * The status of a failed open() (errno `error`) of a file libattn reads:
 * ATTN_EINPUT when the path names nothing that could be read (ENOENT,
 * ENOTDIR, ELOOP, ENAMETOOLONG, EISDIR, ENXIO, ENODEV), ATTN_ENOMEM for
 * ENOMEM, else ATTN_EIO: a failure of the system, not of the file (no
 * descriptor left, EMFILE; no permission, EACCES; an I/O error).
 */
int attn_open_status(int error);

#endif
