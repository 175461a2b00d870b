package tcp

// RxSlots passes on the receive ring size of the AF_XDP socket under the
// program (afxdp.XSK.RxSlots), by which the native engine bounds the
// receive windows it opens (native.Options.RecvMemory); 0 when the
// FrameIO does not tell it.
func (p *progFIO) RxSlots() int {
	if r, ok := p.FrameIO.(interface{ RxSlots() int }); ok {
		return r.RxSlots()
	}
	return 0
}
