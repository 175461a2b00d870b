package testutil

import "github.com/dgramio/dgramio"

// CongestionCase is a userspace TCP engine, the congestion control a
// Config gives it (empty: the default) and the one it must run.
type CongestionCase struct {
	Stack       dgramio.TCPStack
	Given, Want dgramio.Congestion
}

// CongestionDefault is Config.TCP.Congestion after the defaults for a
// tcp-xdp Config on the engine s: the host's where s implements it.
func CongestionDefault(s dgramio.TCPStack) dgramio.Congestion {
	return dgramio.Config{Kind: dgramio.KindTCPXDP, TCP: dgramio.TCPTuning{Stack: s}}.WithDefaults().TCP.Congestion
}

// CongestionCases are the cases a layer that builds an engine from a
// Config checks it against: the defaults of either engine (an empty
// Stack is the native engine, tcp-xdp's default) and controls given.
func CongestionCases() []CongestionCase {
	native, netstack := CongestionDefault(dgramio.TCPStackNative), CongestionDefault(dgramio.TCPStackNetstack)
	return []CongestionCase{
		{"", "", native},
		{dgramio.TCPStackNative, "", native},
		{dgramio.TCPStackNetstack, "", netstack},
		{"", dgramio.CongestionReno, dgramio.CongestionReno},
		{dgramio.TCPStackNative, dgramio.CongestionCubic, dgramio.CongestionCubic},
		{dgramio.TCPStackNative, dgramio.CongestionBBR, dgramio.CongestionBBR},
		{dgramio.TCPStackNetstack, dgramio.CongestionCubic, dgramio.CongestionCubic},
		{dgramio.TCPStackNetstack, dgramio.CongestionReno, dgramio.CongestionReno},
	}
}
