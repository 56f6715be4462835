// SPDX-License-Identifier: MIT
/*
 * flamegraph_js.c - the flame graph's script, assets/flamegraph.js, built
 * into the binary as one NUL-terminated string (output_flamegraph_js). The
 * path is from the repository's root, where the Makefile and the tests'
 * outdrv build run; the Makefile rebuilds this object when the script
 * changes.
 */
__asm__(".pushsection .rodata\n"
	".global output_flamegraph_js\n"
	".type output_flamegraph_js, @object\n"
	"output_flamegraph_js:\n"
	".incbin \"user/output/assets/flamegraph.js\"\n"
	".byte 0\n"
	".size output_flamegraph_js, . - output_flamegraph_js\n"
	".popsection\n");
