// TensorBoard event files (events.out.tfevents.*), written without TensorFlow or protobuf:
// TFRecord framing and a hand-written encoder of the few protocol-buffer fields TensorBoard reads
// (docs/formats.md, "TensorBoard event files").
//
// A record is  uint64 length (LE) | uint32 masked CRC-32C of those 8 bytes | data |
// uint32 masked CRC-32C of data, with mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8.
// data is an Event message (tensorflow/core/util/event.proto):
//   Event { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5;
//           SessionLog session_log = 7 }
//   Summary { repeated Value value = 1 }
//   Value { string tag = 1; float simple_value = 2; Image image = 4 }
//   Image { int32 height = 1; int32 width = 2; int32 colorspace = 3; bytes encoded_image_string = 4 }
//   SessionLog { SessionStatus status = 1 }  (START = 1)
// The first record of a file is Event { wall_time, file_version: "brain.Event:2" }. Every record
// is flushed when written, so a running TensorBoard sees it; a failed write (a full disk) is an
// error naming the file.
#ifndef MALA_TFEVENTS_H
#define MALA_TFEVENTS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/common.h"

typedef struct {
    FILE *f;
    char path[4200];
} TfEvents;

// Creates a new event file in dir, events.out.tfevents.<unix time>.<hostname> (".1", ".2", ...
// appended when that name is taken: an existing file is never opened), and writes its first record.
int tfev_open_dir(TfEvents *w, const char *dir, MalaErr *err);
// The same on an open stream (tests: /dev/full); path names it in messages. Takes ownership of f.
int tfev_attach(TfEvents *w, FILE *f, const char *path, MalaErr *err);
// One Event holding n scalars (tags[i], vals[i]) at step.
int tfev_scalars(TfEvents *w, int64_t step, const char *const *tags, const float *vals, int n, MalaErr *err);
// One Event holding a PNG image (colorspace: 1 gray, 2 gray + alpha, 3 RGB, 4 RGBA).
int tfev_image(TfEvents *w, int64_t step, const char *tag, int height, int width, int colorspace, const void *png,
               size_t len, MalaErr *err);
// Event { session_log: START } at step: TensorBoard drops the events of steps >= step that earlier
// files hold (a resumed run's steps after its checkpoint, logged by the process that was stopped).
int tfev_session_start(TfEvents *w, int64_t step, MalaErr *err);
// Closes the file (no-op when none is open); -1 when the last bytes could not be written.
int tfev_close(TfEvents *w, MalaErr *err);

// CRC-32C (Castagnoli, reflected polynomial 0x82f63b78), and TFRecord's mask of it.
uint32_t tfev_crc32c(const void *data, size_t n);
static inline uint32_t tfev_mask_crc(uint32_t c) { return ((c >> 15) | (c << 17)) + 0xa282ead8u; }

#endif
