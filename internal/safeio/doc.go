// Package safeio reads input and writes output for gpusched's loaders and
// commands without trusting what a path names or how much a stream holds.
//
// Reading: [Open] opens only regular files, without blocking on a named
// pipe (on Unix the file is opened non-blocking and checked with fstat
// before any read), so /dev/zero, a FIFO or a directory is refused at once
// with [ErrNotRegular]; [ReadFile] and [ReadAll] read through a size limit
// and fail with [ErrTooLarge] past it, so an endless or huge input costs at
// most the limit. [SkipBOM] and [TrimBOM] drop a leading UTF-8 byte order
// mark, which spreadsheet programs write and which would otherwise become
// part of the first field or key.
//
// Writing: [Create] and [WriteFile] write to a temporary file in the target
// folder and rename it into place on [File.Commit], so a reader never sees
// a half-written file, a failure leaves any old file untouched, and a
// symbolic link planted at the output name is replaced, not followed.
//
// The functions are safe for concurrent use; a [File] is not.
package safeio
