/*
 * rtc/stdint.h: the fixed-width integers, for NVRTC.
 *
 * NVRTC (run-time compilation, minitensor.cuda.compile) ships no C standard
 * headers, and the library's headers that a user kernel includes
 * (minitensor.h, indexing.h) include <stdint.h>. This directory is on
 * NVRTC's include path only; nvcc and host compilers use their own.
 */
#ifndef MT_RTC_STDINT_H
#define MT_RTC_STDINT_H

typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
typedef long long intptr_t;
typedef unsigned long long uintptr_t;

#define INT32_MAX 2147483647
#define INT32_MIN (-INT32_MAX - 1)
#define INT64_MAX 9223372036854775807LL
#define INT64_MIN (-INT64_MAX - 1)
#define UINT32_MAX 4294967295U
#define UINT64_MAX 18446744073709551615ULL

#endif
