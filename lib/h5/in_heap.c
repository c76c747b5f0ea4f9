/*
 * in_heap.c - the names of a group, checked before HDF5 lists them (h5/in.h).
 *
 * A group of the original file format keeps its link names in a local
 * heap, whose free space is a list of blocks, each naming the offset of the
 * next.  HDF5 1.10 builds that list in memory without looking for a loop:
 * a damaged heap whose list leads back to itself makes HDF5 allocate small
 * blocks until the address space runs out (seconds, then a gigabyte).  So
 * before HDF5 looks up or lists the names of such a group, the group's
 * object header (version 1) and its heap are read raw here, and a free
 * list that loops, or runs past the heap's end, is refused.  Whatever else
 * may be wrong with the header or the heap is left to HDF5, which refuses
 * it at once.
 */
#define _GNU_SOURCE     /* pread */
#include "h5/in.h"

#include "core/core.h"
#include "h5/close.h"

#include <stdint.h>
#include <string.h>
#include <unistd.h>

/* The object header message that locates a group's names (the file
 * format's "Symbol Table Message"), and the one that continues a header
 * in another block. */
#define MESSAGE_SYMBOL_TABLE 0x0011
#define MESSAGE_CONTINUATION 0x0010

/* Header blocks followed, at most: a header continued further is left to
 * HDF5 (which has its own limits). */
#define MAX_HEADER_BLOCKS 16

/* The longest header block read (a version 1 header's blocks hold at most
 * 64 KiB of messages each, in practice). */
#define MAX_HEADER_BLOCK ((uint64_t)1 << 20)

/* The offset that ends a local heap's free list (HDF5's H5HL_FREE_NULL). */
#define FREE_LIST_END 1

/* The file's own bytes as HDF5 addresses them. */
typedef struct raw_file {
    int fd;
    uint64_t size;              /* bytes in the file                      */
    uint64_t base;              /* where address 0 is (the user block's end) */
    size_t sizeof_addr;         /* bytes of an address                    */
    size_t sizeof_size;         /* bytes of a length                      */
} raw_file;

static bool raw_open(const attn_h5in *in, raw_file *r)
{
    hid_t fcpl = H5Fget_create_plist(in->file);
    hsize_t user_block = 0;
    bool ok = fcpl >= 0 && H5Pget_sizes(fcpl, &r->sizeof_addr, &r->sizeof_size) >= 0 &&
              H5Pget_userblock(fcpl, &user_block) >= 0;
    h5_close(fcpl);
    r->fd = in->fd;
    r->size = (uint64_t)in->opened.st_size;
    r->base = (uint64_t)user_block;
    return ok && r->sizeof_addr >= 2 && r->sizeof_addr <= 8 && r->sizeof_size >= 2 &&
           r->sizeof_size <= 8;
}

/* Reads `len` bytes at the file's `address`: false when they are not all
 * in the file. */
static bool raw_read(const raw_file *r, uint64_t address, void *buf, size_t len)
{
    if (address > r->size || r->base > r->size - address || len > r->size - r->base - address)
        return false;
    return pread(r->fd, buf, len, (off_t)(r->base + address)) == (ssize_t)len;
}

/* The address of the local heap of the group whose version 1 object
 * header is at `header`: false when there is none to check (another
 * version, another kind of group, a header HDF5 would refuse itself).
 * Each message is read where it lies, nothing allocated. */
static bool find_heap(const raw_file *r, uint64_t header, uint64_t *heap)
{
    unsigned char prefix[16], message[8], data[16];
    uint64_t blocks[MAX_HEADER_BLOCKS][2];      /* (address, length) to read */
    size_t queued = 0;
    const size_t sa = r->sizeof_addr, ss = r->sizeof_size;
    if (!raw_read(r, header, prefix, sizeof prefix) || prefix[0] != 1)
        return false;
    blocks[queued][0] = header + sizeof prefix;
    blocks[queued++][1] = h5in_le_number(prefix + 8, 4);
    for (size_t next = 0; next < queued; next++) {
        uint64_t address = blocks[next][0], length = blocks[next][1];
        if (length > MAX_HEADER_BLOCK)
            return false;
        /* each message: type (2), size (2), flags and reserved (4), data */
        for (uint64_t at = 0; length - at >= sizeof message;) {
            if (!raw_read(r, address + at, message, sizeof message))
                return false;
            uint64_t type = h5in_le_number(message, 2), size = h5in_le_number(message + 2, 2);
            if (size > length - at - sizeof message)
                break;
            if (type == MESSAGE_SYMBOL_TABLE && size >= 2 * sa) {
                if (!raw_read(r, address + at + sizeof message, data, 2 * sa))
                    return false;
                *heap = h5in_le_number(data + sa, sa);      /* after the B-tree's */
                return true;
            }
            if (type == MESSAGE_CONTINUATION && size >= sa + ss && queued < MAX_HEADER_BLOCKS) {
                if (!raw_read(r, address + at + sizeof message, data, sa + ss))
                    return false;
                blocks[queued][0] = h5in_le_number(data, sa);
                blocks[queued++][1] = h5in_le_number(data + sa, ss);
            }
            at += sizeof message + size;
        }
    }
    return false;
}

/* A local heap as its free list is walked. */
typedef struct local_heap {
    uint64_t data;              /* the data's address                     */
    uint64_t size;              /* the data's size                        */
} local_heap;

/* What follows the free block at `at`, as HDF5 1.10 reads it
 * (H5HL__fl_deserialize): the next block's offset into *next, true; false
 * at the list's end or where HDF5 refuses the list itself (a block past
 * the data, a next offset of 0, a block longer than the rest); *damaged
 * where HDF5 would read past the heap's data. */
static bool next_free(const raw_file *r, const local_heap *h, uint64_t at, uint64_t *next,
                      bool *damaged)
{
    unsigned char block[16];                    /* next offset, size: lengths */
    const size_t ss = r->sizeof_size;
    if (at == FREE_LIST_END || at >= h->size)
        return false;
    if (h->size - at < 2 * ss) {
        *damaged = true;
        return false;
    }
    if (!raw_read(r, h->data + at, block, 2 * ss))
        return false;
    *next = h5in_le_number(block, ss);
    return *next != 0 && h5in_le_number(block + ss, ss) <= h->size - at;
}

/* Whether the free list of the local heap at `heap` loops, or runs past
 * the heap's data, as HDF5 1.10 walks it: a loop found as Brent's method
 * finds one, a block read at a time, nothing allocated.  A heap that
 * cannot be read here is not damaged (HDF5 refuses it itself). */
static bool free_list_damaged(const raw_file *r, uint64_t heap)
{
    unsigned char head[8 + 3 * 8];      /* "HEAP", version, reserved, two lengths, an address */
    const size_t ss = r->sizeof_size, sa = r->sizeof_addr;
    if (!raw_read(r, heap, head, 8 + 2 * ss + sa) || memcmp(head, "HEAP", 4) != 0 || head[4] != 0)
        return false;
    local_heap h = {.size = h5in_le_number(head + 8, ss),
                    .data = h5in_le_number(head + 8 + 2 * ss, sa)};
    uint64_t tortoise = h5in_le_number(head + 8 + ss, ss), hare = tortoise, next;
    bool damaged = false;
    for (uint64_t power = 1, length = 1; next_free(r, &h, hare, &next, &damaged); length++) {
        hare = next;
        if (hare == tortoise)
            return true;                        /* back to a block seen */
        if (length == power) {
            tortoise = hare;
            power *= 2;
            length = 0;
        }
    }
    return damaged;
}

int h5in_check_names_at(const attn_h5in *in, haddr_t header, const char *name, attn_error *err)
{
    raw_file r;
    uint64_t heap;
    if (header == HADDR_UNDEF || !raw_open(in, &r) || !find_heap(&r, header, &heap) ||
        !free_list_damaged(&r, heap))
        return ATTN_OK;
    bool root = name[0] == '\0' || strcmp(name, ".") == 0 || strcmp(name, "/") == 0;
    return attn_fail(err, ATTN_EINPUT, "%s: the names in group %s%s are damaged (the free list "
                     "of its local heap loops or runs past the heap); not read", in->path,
                     root || name[0] == '/' ? "" : "/", root ? "/" : name);
}

int h5in_check_names(const attn_h5in *in, hid_t group, const char *name, attn_error *err)
{
    H5O_info_t info;
    if (H5Oget_info2(group, &info, H5O_INFO_BASIC) < 0) {
        H5Eclear2(H5E_DEFAULT);
        return ATTN_OK;                 /* HDF5 says what is wrong when it lists them */
    }
    return info.type == H5O_TYPE_GROUP ? h5in_check_names_at(in, info.addr, name, err) : ATTN_OK;
}
