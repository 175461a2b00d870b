package afxdp

// RxSlots returns the number of frames the socket's receive ring holds
// (Options.RingSize): what may arrive while its reader does not poll
// before the kernel drops (xsk.rx_dropped). The native engine bounds the
// receive windows it opens by it.
func (x *XSK) RxSlots() int { return x.opts.RingSize }
