/* A binary min-heap of timed events for the simulator; internal. */
#ifndef TASKER_EVENT_HEAP_H
#define TASKER_EVENT_HEAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct tk__event {
  int64_t at_us; /* when it happens */
  uint64_t seq;  /* insertion order: equal times pop first-in first-out */
  int32_t who;
  int32_t kind;
} tk__event;

typedef struct tk__event_heap {
  tk__event *ev; /* caller-owned storage of `cap` events */
  size_t len, cap;
  uint64_t next_seq;
} tk__event_heap;

/* Add an event (its seq is assigned here). Returns 0, or -1 when full. */
int tk__heap_push(tk__event_heap *h, int64_t at_us, int32_t who, int32_t kind);

/* Remove the earliest event into *out. Returns 0, or -1 when empty. */
int tk__heap_pop(tk__event_heap *h, tk__event *out);

/* Pop the earliest event and push a new one in a single pass: the common
 * step of a simulation, where handling an event schedules the next one of
 * the same actor. Returns 0, or -1 when empty. Read the top (ev[0]) first. */
int tk__heap_replace_top(tk__event_heap *h, int64_t at_us, int32_t who, int32_t kind);

#endif
