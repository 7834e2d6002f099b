package warmpool

// WatchCPU is watchCPU, for the tests.
var WatchCPU = watchCPU

// CPUTicks is cpuTicks, for the tests.
var CPUTicks = cpuTicks
