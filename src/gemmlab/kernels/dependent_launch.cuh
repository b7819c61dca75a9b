// Shared by the FP32 and tensor-core ladders: programmatic dependent launch.
#ifndef GEMMLAB_DEPENDENT_LAUNCH_CUH
#define GEMMLAB_DEPENDENT_LAUNCH_CUH

// Programmatic dependent launch (compute capability 9.0 and newer), for a
// kernel whose KernelSpec says dependent_launch: wait until the launches this
// one depends on have completed and their writes are visible, before the
// first read or write of global memory (a no-op for a launch that did not ask
// for PDL), then let the next launch on the stream start its blocks as SMs
// free up: that launch waits here in turn, so it cannot read what this one
// has yet to write. Earlier architectures have neither instruction, and no
// launch there asks for PDL.
__device__ __forceinline__ void wait_for_previous_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;\n");
#endif
}

#endif
