package warmpool

// WatchCPU is watchCPU, for the tests.
var WatchCPU = watchCPU

// ParseCPUTicks is parseCPUTicks, for the tests.
var ParseCPUTicks = parseCPUTicks
