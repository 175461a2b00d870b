// Package preflight looks at the host before a netbench run for what moves
// latency by microseconds on real ports: interrupt coalescing, where the
// ports' interrupts go, NUMA nodes of the ports and the pollers, isolated
// CPUs and hyperthread siblings. It reads sysfs and procfs under a root
// that tests replace (System) and changes nothing.
package preflight
