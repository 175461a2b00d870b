package native

import "github.com/dgramio/dgramio"

// counter indexes Engine.cnt. Every frame the engine does not take has its
// own named counter; the Loss ones are frames that carried data no one got.
type counter int

const (
	// The counters of every frame and segment first: one cache line.
	cRxFrames counter = iota
	cTxFrames
	cIPDelivered
	cTCPSegmentsIn
	cTCPSegmentsOut
	cTCPPredicted
	cRxNotForUs
	cRxShort
	cRxUnknownEtherType
	cARPRepliesSent
	cARPRequestsSent
	cARPMalformed
	cARPUnresolved
	cARPShared
	cIPVersion
	cIPLength
	cIPChecksum
	cIPOptions
	cIPFragment
	cIPReassembled
	cIPReasmFailed
	cIPReasmTimeout
	cIPNotOurAddr
	cICMPEchoReplies
	cICMPBadChecksum
	cICMPUnreachSent
	cICMPIgnored
	cICMPTooBig
	cTCPShort
	cTCPChecksum
	cTCPBadOption
	cTCPSynFin
	cTCPSynRcvdNewSyn
	cTCPOOOAfterFIN
	cTCPNoConn
	cTCPListenOverflow
	cTCPConnTableFull
	cTCPResetsSent
	cTCPResetsIn
	cTCPChallengeACKs
	cTCPChallengeLimited
	cTCPOutOfWindow
	cTCPZeroWindowACK
	cTCPPAWS
	cTCPRejectAcksLimited
	cTCPAckUnsent
	cTCPAckTooOld
	cTCPNoACK
	cTCPDupData
	cTCPOOOQueued
	cTCPOOOFull
	cTCPRetransmits
	cTCPFastRetransmits
	cTCPLostRetransmits
	cTCPDSACKsSent
	cTCPDSACKsIn
	cTCPSpuriousRtx
	cTCPTimeouts
	cTCPPersistProbes
	cTCPKeepaliveProbes
	cTCPActiveOpens
	cTCPPassiveOpens
	cTCPCookiesSent
	cTCPCookiesOK
	cTCPCookiesBad
	cTCPAborts
	// Hardening against a hostile peer and a long life (blind injection,
	// connections that never end).
	cTCPChallengeConnLimited
	cTCPPAWSIdle
	cTCPCookiesUnsolicited
	cTCPCookiesNoSlot
	cTCPCookiesTSOptions
	cTCPPersistTimeouts
	cTCPOrphanAborts
	cTCPUserTimeouts
	cTCPTimeWaitRecords
	cTCPTimeWaitOverflow
	cTCPSynRcvdOverflow
	// Loss detection of rack.go (RFC 8985) and docs/loss.md.
	cTCPTLPProbes
	cTCPTLPRecoveries
	cTCPTLPSpurious
	cTCPRACKRecoveries
	cTCPRACKReorder
	cTCPRACKReoWiden
	cTxRingFull

	// Hardening against the link (docs/hardening-net.md).
	cARPEvicted
	cARPTableFull
	cARPGratuitous
	cARPMACChanged
	cARPProbes
	cARPUnsolicited
	cIPSourceOurs
	cIPFragDup
	cIPReasmOverlap
	cIPReasmEvicted
	cICMPRateLimited
	cICMPFragNeeded
	cICMPFragNeededBad
	cTCPPMTULowered
	cTCPCwndRestarts
	cTCPSACKFull

	// Recovery's sending and undo (docs/loss.md: PRR, F-RTO).
	cTCPPRRRecoveries
	cTCPSpuriousRTOs
	cTCPRtxUntracked

	// HyStart++ (docs/loss.md).
	cTCPHyStartCSS
	cTCPHyStartSpurious
	cTCPHyStartCA

	// Receive memory shared among connections (docs/memory.md).
	cTCPRcvWndShared
	cTCPRcvWndIdle

	// BBR (docs/loss.md).
	cTCPBBRDrain
	cTCPBBRProbeBW
	cTCPBBRProbeRTT
	cTCPPacingDelays
	cTCPRateUnrecorded
	nCounters
)

var counterNames = [nCounters]struct {
	name string
	loss bool
}{
	cRxFrames:             {"rx_frames", false},
	cRxNotForUs:           {"rx_not_for_us", false},
	cRxShort:              {"rx_short", true},
	cRxUnknownEtherType:   {"rx_unknown_ethertype", false},
	cARPRepliesSent:       {"arp_replies_sent", false},
	cARPRequestsSent:      {"arp_requests_sent", false},
	cARPMalformed:         {"arp_malformed", false},
	cARPUnresolved:        {"arp_unresolved", false},
	cARPShared:            {"arp_shared", false}, // replies another engine of the ARPShare learnt
	cIPVersion:            {"ip_bad_version", true},
	cIPLength:             {"ip_bad_length", true},
	cIPChecksum:           {"ip_bad_checksum", true},
	cIPOptions:            {"ip_options_dropped", true},
	cIPFragment:           {"ip_fragments", false},
	cIPReassembled:        {"ip_reassembled", false},
	cIPReasmFailed:        {"ip_reassembly_failed", true},
	cIPReasmTimeout:       {"ip_reassembly_timeout", true},
	cIPNotOurAddr:         {"ip_not_our_address", false},
	cIPDelivered:          {"ip_delivered", false},
	cICMPEchoReplies:      {"icmp_echo_replies", false},
	cICMPBadChecksum:      {"icmp_bad_checksum", false},
	cICMPUnreachSent:      {"icmp_unreachable_sent", false},
	cICMPIgnored:          {"icmp_ignored", false},
	cICMPTooBig:           {"icmp_reply_too_big", false},
	cTCPSegmentsIn:        {"tcp_segments_in", false},
	cTCPSegmentsOut:       {"tcp_segments_out", false},
	cTCPPredicted:         {"tcp_predicted", false}, // of tcp_segments_in, those header prediction took
	cTCPShort:             {"tcp_short", true},
	cTCPChecksum:          {"tcp_checksum_errors", true},
	cTCPBadOption:         {"tcp_bad_options", true},
	cTCPSynFin:            {"tcp_syn_fin_dropped", false},
	cTCPSynRcvdNewSyn:     {"tcp_synrcvd_new_syn", false}, // a new SYN reset a half-open passive connection
	cTCPOOOAfterFIN:       {"tcp_ooo_after_fin", false},   // out-of-order data beyond the peer's FIN, dropped
	cTCPNoConn:            {"tcp_no_connection", false},
	cTCPListenOverflow:    {"tcp_listen_overflow", false},
	cTCPConnTableFull:     {"tcp_conn_table_full", false},
	cTCPResetsSent:        {"tcp_resets_sent", false},
	cTCPResetsIn:          {"tcp_resets_received", false},
	cTCPChallengeACKs:     {"tcp_challenge_acks", false},
	cTCPChallengeLimited:  {"tcp_challenge_acks_limited", false},
	cTCPOutOfWindow:       {"tcp_out_of_window", false},
	cTCPZeroWindowACK:     {"tcp_zero_window_acks_taken", false},
	cTCPPAWS:              {"tcp_paws_rejected", false},
	cTCPRejectAcksLimited: {"tcp_reject_acks_limited", false},
	cTCPAckUnsent:         {"tcp_ack_unsent_data", false},
	cTCPAckTooOld:         {"tcp_ack_too_old", false},
	cTCPNoACK:             {"tcp_no_ack_flag", false},
	cTCPDupData:           {"tcp_duplicate_data", false},
	cTCPOOOQueued:         {"tcp_out_of_order_queued", false},
	cTCPOOOFull:           {"tcp_out_of_order_full", false},
	cTCPRetransmits:       {"tcp_retransmits", false},
	cTCPFastRetransmits:   {"tcp_fast_retransmits", false},
	cTCPLostRetransmits:   {"tcp_lost_retransmits", false},
	cTCPDSACKsSent:        {"tcp_dsacks_sent", false},          // RFC 2883: duplicate data reported
	cTCPDSACKsIn:          {"tcp_dsacks_received", false},      // the peer got data of ours twice
	cTCPSpuriousRtx:       {"tcp_spurious_retransmits", false}, // of them, data we retransmitted (RFC 3708)
	cTCPTimeouts:          {"tcp_timeouts", false},
	cTCPPersistProbes:     {"tcp_persist_probes", false},
	cTCPKeepaliveProbes:   {"tcp_keepalive_probes", false},
	cTCPActiveOpens:       {"tcp_active_opens", false},
	cTCPPassiveOpens:      {"tcp_passive_opens", false},
	cTCPCookiesSent:       {"tcp_syncookies_sent", false},
	cTCPCookiesOK:         {"tcp_syncookies_ok", false},
	cTCPCookiesBad:        {"tcp_syncookies_failed", false},
	cTCPAborts:            {"tcp_aborts", false},
	// Hardening: see docs/hardening.md.
	cTCPChallengeConnLimited: {"tcp_challenge_acks_conn_limited", false}, // one connection's challenge ACKs past its rate
	cTCPPAWSIdle:             {"tcp_paws_idle_accepted", false},          // RFC 7323 §5.5: TS.Recent invalid after 24 days idle
	cTCPCookiesUnsolicited:   {"tcp_syncookies_unsolicited", false},      // a bare ACK at a listener that sent no recent cookie
	cTCPCookiesNoSlot:        {"tcp_syncookies_no_slot", false},          // a valid cookie ACK dropped: the table was full
	cTCPCookiesTSOptions:     {"tcp_syncookies_ts_options", false},       // cookie connections with window scale, SACK and timestamps from the echo
	cTCPPersistTimeouts:      {"tcp_persist_timeouts", false},            // zero-window probes unanswered MaxRetries times
	cTCPOrphanAborts:         {"tcp_orphan_aborts", false},               // closed connections stuck in persist, aborted
	cTCPUserTimeouts:         {"tcp_user_timeouts", false},               // Options.UserTimeout passed without progress
	cTCPTimeWaitRecords:      {"tcp_timewait_records", false},            // connections that left their slot for a TIME-WAIT record
	cTCPTimeWaitOverflow:     {"tcp_timewait_overflow", false},           // TIME-WAIT skipped: MaxTimeWait records in use
	cTCPSynRcvdOverflow:      {"tcp_syn_received_overflow", false},       // SYNs answered by a cookie: MaxSYNReceived reached
	// Loss detection: see docs/loss.md.
	cTCPTLPProbes:      {"tcp_tlp_probes", false},           // tail loss probes sent (RFC 8985 §7.3)
	cTCPTLPRecoveries:  {"tcp_tlp_recoveries", false},       // probes that repaired a loss: cwnd reduced (§7.4)
	cTCPTLPSpurious:    {"tcp_tlp_spurious", false},         // probes the peer D-SACKed: nothing was lost
	cTCPRACKRecoveries: {"tcp_rack_recoveries", false},      // recoveries RACK's reordering timer started (§6.2)
	cTCPRACKReorder:    {"tcp_rack_reordering_seen", false}, // connections that saw a hole fill by itself
	cTCPRACKReoWiden:   {"tcp_rack_reo_wnd_widened", false}, // reordering window widened by a D-SACK (§6.2 step 4)
	cTxRingFull:        {"tx_ring_full", false},
	cTxFrames:          {"tx_frames", false},

	// Hardening against the link (docs/hardening-net.md).
	cARPEvicted:        {"arp_evicted", false},             // a neighbour pushed out of the full cache
	cARPTableFull:      {"arp_table_full", false},          // no entry could be made: every one is pending or static
	cARPGratuitous:     {"arp_gratuitous", false},          // gratuitous ARP that updated a neighbour
	cARPMACChanged:     {"arp_mac_changed", false},         // a neighbour's MAC changed (connections follow)
	cARPProbes:         {"arp_probes", false},              // unicast requests re-probing a STALE neighbour
	cARPUnsolicited:    {"arp_unsolicited_ignored", false}, // replies for neighbours we do not hold: not learnt
	cIPSourceOurs:      {"ip_source_is_ours", true},
	cIPFragDup:         {"ip_fragment_duplicates", false},
	cIPReasmOverlap:    {"ip_reassembly_overlaps", true},
	cIPReasmEvicted:    {"ip_reassembly_evicted", true},
	cICMPRateLimited:   {"icmp_unreachable_limited", false},
	cICMPFragNeeded:    {"icmp_frag_needed", false},
	cICMPFragNeededBad: {"icmp_frag_needed_ignored", false}, // no connection, or a quote out of its window (RFC 5927)
	cTCPPMTULowered:    {"tcp_pmtu_lowered", false},
	cTCPCwndRestarts:   {"tcp_cwnd_restarts", false},        // cwnd cut after idle (RFC 5681 §4.1)
	cTCPSACKFull:       {"tcp_sack_scoreboard_full", false}, // SACK blocks beyond the scoreboard's 8

	// Recovery's sending and undo (docs/loss.md).
	cTCPPRRRecoveries: {"tcp_prr_recoveries", false},            // SACK recoveries whose sending PRR paced (RFC 6937)
	cTCPSpuriousRTOs:  {"tcp_spurious_rtos", false},             // timeouts the timestamps proved spurious, undone (RFC 3522, RFC 4015)
	cTCPRtxUntracked:  {"tcp_lost_retransmit_untracked", false}, // recovery retransmissions beyond lostrtx.go's table: found lost only at SND.UNA

	// HyStart++ (docs/loss.md).
	cTCPHyStartCSS:      {"tcp_hystart_css_entries", false},        // slow start saw the RTT rise: to Conservative Slow Start (RFC 9406 §4.2)
	cTCPHyStartSpurious: {"tcp_hystart_css_exits_spurious", false}, // CSS saw the RTT fall below its baseline: back to slow start
	cTCPHyStartCA:       {"tcp_hystart_ca_entries", false},         // CSS ran CSS_ROUNDS rounds: congestion avoidance, ssthresh = cwnd

	// BBR (docs/loss.md).
	cTCPBBRDrain:       {"tcp_bbr_startup_exits", false}, // Startup found the pipe full: to Drain
	cTCPBBRProbeBW:     {"tcp_bbr_probe_bw", false},      // entries to ProbeBW (from Drain or ProbeRTT)
	cTCPBBRProbeRTT:    {"tcp_bbr_probe_rtt", false},     // entries to ProbeRTT: 10 s without a new minimum RTT
	cTCPRcvWndShared:   {"tcp_rcvwnd_shared", false},     // a window lowered to its share of RecvMemory, another being held back by it
	cTCPRcvWndIdle:     {"tcp_rcvwnd_idle", false},       // a window's auto-tuned growth given back after PoolIdle without data
	cTCPPacingDelays:   {"tcp_pacing_delays", false},     // sends held back until the pacing rate allowed them
	cTCPRateUnrecorded: {"tcp_rate_unrecorded", false},   // segments sent with the delivery-rate ring at its largest: no sample from them
}

// Layer is the layer name of the engine's counters.
const Layer = "native"

// AppendCounters appends the engine's counters (layer "native") to dst
// and returns it. Every frame the engine did not take is in a counter of
// its own reason. Call it from the engine's goroutine.
func (e *Engine) AppendCounters(dst []dgramio.Counter) []dgramio.Counter {
	for i := counter(0); i < nCounters; i++ {
		n := counterNames[i]
		dst = append(dst, dgramio.Counter{Layer: Layer, Name: n.name, Value: e.cnt[i], Loss: n.loss})
	}
	return e.appendCounters6(dst)
}

// Counter returns the value of the counter named name (as AppendCounters
// names it) and whether it exists.
func (e *Engine) Counter(name string) (uint64, bool) {
	for i := counter(0); i < nCounters; i++ {
		if counterNames[i].name == name {
			return e.cnt[i], true
		}
	}
	return e.counter6(name)
}
