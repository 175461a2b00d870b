// Package ifaddr asks the kernel which addresses an interface holds.
package ifaddr

import (
	"fmt"
	"net"
	"net/netip"
)

// KernelHas reports whether addr is an address of the kernel
// interface iface, in the calling thread's network namespace. The raw
// kinds ask it before they take an address the kernel might also answer
// for (its stack would reset our TCP peers, or answer our datagrams with
// ICMP port unreachable).
func KernelHas(iface string, addr netip.Addr) (bool, error) {
	ifc, err := net.InterfaceByName(iface)
	if err != nil {
		return false, fmt.Errorf("interface %s: %w", iface, err)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		return false, fmt.Errorf("addresses of %s: %w", iface, err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == addr {
				return true, nil
			}
		}
	}
	return false, nil
}

// KernelHoldsAnywhere reports whether addr is an address of any kernel
// interface in the calling thread's network namespace: where it is not,
// no one but us answers ARP or neighbour solicitations for it.
func KernelHoldsAnywhere(addr netip.Addr) (bool, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false, fmt.Errorf("the kernel's addresses: %w", err)
	}
	addr = addr.Unmap()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap() == addr {
				return true, nil
			}
		}
	}
	return false, nil
}
