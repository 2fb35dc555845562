/*
 * clock.h - the project's one monotonic clock (CLOCK_MONOTONIC: not moved
 * by wall-clock changes), for timings, timeouts and rates everywhere.
 * Pure functions: any thread.
 */
#ifndef EMBER_CLOCK_H
#define EMBER_CLOCK_H

#include <stdint.h>

/* Monotonic time in seconds (an arbitrary origin). */
double clock_now_s(void);

/* The same clock in nanoseconds. */
uint64_t clock_now_ns(void);

/* CPU time of the whole process (all threads) in seconds: what a step
 * cost in work, whatever else shares the machine. */
double clock_cpu_s(void);

#endif
