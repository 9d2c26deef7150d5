/*
 * rtc/stddef.h: for NVRTC, which declares size_t and ptrdiff_t itself but
 * ships no <stddef.h> for the library's headers to include (see stdint.h).
 */
#ifndef MT_RTC_STDDEF_H
#define MT_RTC_STDDEF_H

#ifndef NULL
#define NULL 0
#endif

#endif
