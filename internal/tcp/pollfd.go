package tcp

// PollFD returns the fd of the FrameIO under the program
// (afxdp.XSK.PollFD), or -1 when it has none (a capture wrapper), so that
// tcp/netconn's native poller can sleep in the Go netpoller.
func (p *progFIO) PollFD() int {
	if f, ok := p.FrameIO.(interface{ PollFD() int }); ok {
		return f.PollFD()
	}
	return -1
}

// RxReady reports whether frames wait in the RX ring of the FrameIO under
// the program (afxdp.XSK.RxReady); false when it cannot tell.
func (p *progFIO) RxReady() bool {
	if f, ok := p.FrameIO.(interface{ RxReady() bool }); ok {
		return f.RxReady()
	}
	return false
}
