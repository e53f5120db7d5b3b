// SPDX-License-Identifier: Apache-2.0
// RequestBuffers: the pages of the buffers that idle worker threads keep.
//
// libfuse gives each worker thread (fuse_workers.h) a request buffer of
// max_write plus a page (1 MiB and 4 KiB here) and keeps it for the thread's
// life, and the workers stay until the daemon is quiet (FuseWorkers::end_idle
// ends all that wait but one). Each thread also keeps a buffer for the data of
// its read replies, to allocate none per read. Buffers that once held a 1 MiB
// write and a 1 MiB read keep 512 pages resident, 2 MiB of RSS per worker
// after the load has gone.
//
// So a worker reads its requests through read_request() and builds read
// replies in reply_buffer(), and release_idle() (the heap trimmer calls it
// once a second after work, skipping busy seconds, heap_trimmer.h) asks each
// worker that waits in read(2) with pages of a large request or reply still in
// its buffers to give them back: a signal (SIGURG) ends its wait (EINTR; a
// request the kernel had begun to copy is delivered as usual), the worker
// itself drops the pages (MADV_DONTNEED: they read as zeros and are faulted in
// again by the next large request), has glibc trim the top of its heap, and
// waits again. Only a waiting worker is signalled, through a state both sides
// change atomically, and a worker that a signal is on its way to takes it
// before serving anything: no system call of a request's serving is
// interrupted. The serving thread blocks the signal for the threads it starts
// (block_release_signal); each worker unblocks it for itself (and the workers
// it starts inherit it unblocked, which changes nothing).
//
// The FUSE over io_uring threads (fuse_ring.h) are not signalled: each gives
// back its entry's payload pages itself after a second without a request
// (the kernel copies into an entry only inside its thread's io_uring_enter).
// Each builds its read replies in its entry's payload buffer (reply_in),
// where the reply goes anyway: the data is copied once, from the store into
// the buffer the kernel copies to the caller, not also from a buffer of its
// own into the entry.
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <cstddef>
#include <span>

namespace mimicfs::request_buffers {

// A request or reply worth its buffer's pages back when it is over: smaller
// ones touch a few pages, which stay.
constexpr size_t kLargeBytes = 64 << 10;

// Blocks the release signal in the calling thread and the threads it starts
// from now on; call on the serving thread before it starts any.
void block_release_signal();

// read(2) of a request from `fd` into `buffer`, the calling thread's request
// buffer (the same one every call), registering the thread on its first call;
// the result and errno are read(2)'s.
ssize_t read_request(int fd, void* buffer, size_t length);

// `size` bytes of the calling thread's buffer for a read reply's data, valid
// until its next call (reply_buffer on a worker thread, whose pages
// release_idle() reclaims; the area given to reply_in; any other thread's
// are kept).
std::span<std::byte> reply_buffer(size_t size);

// Makes `area` the calling thread's buffer for read replies' data from now
// on, for those that fit (a FUSE over io_uring entry's payload buffer, whose
// pages its thread gives back itself when idle); an empty span goes back to
// the thread's own.
void reply_in(std::span<std::byte> area);

// Asks every worker waiting in read_request() with pages of a large request or
// reply in its buffers to give them back; returns how many were asked. Any
// thread.
size_t release_idle();

// Makes worker `thread`'s read_request() return -1 with errno EINTR: now if
// it waits in read(2) (the same signal), else before its next read. A signal
// that reached the worker just before its read began leaves it waiting, and
// a thread not registered yet (before its first read_request) is not found:
// call again until it has returned. Any thread; a thread that is no worker
// is left alone.
void end_wait(pthread_t thread);

// How many times a worker gave up waiting for a release signal on its way (a
// second each): 0 unless a send failed.
size_t release_signals_missed();

}  // namespace mimicfs::request_buffers
