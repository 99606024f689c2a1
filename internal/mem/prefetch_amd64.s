#include "textflag.h"

// func Prefetch(addr uintptr)
TEXT ·Prefetch(SB), NOSPLIT, $0-8
	MOVQ addr+0(FP), AX
	PREFETCHT0 (AX)
	RET
