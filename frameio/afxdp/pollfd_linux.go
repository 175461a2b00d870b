package afxdp

// PollFD returns the socket's file descriptor, which poll(2) and epoll
// report readable while the RX ring holds frames: a poll loop may sleep on
// it in an event loop of its own (tcp/netconn's native poller sleeps in
// the Go netpoller on a duplicate of it). The XSK keeps owning it: do not
// close it or read from it; O_NONBLOCK may be set on it (the XSK's own
// calls do not block either way).
func (x *XSK) PollFD() int { return x.fd }
