// Package bench is the report model of the measuring tools and its
// rendering: a cell (one kind at one offered rate) built from the two
// ends' results, the saturation rule, the conservation check, which side
// limited a saturated cell, the capacity of a row, repeats and their
// spread, the comparison of two reports, and the table, report.md and
// plots netbench writes. The load engine the results come from is package
// load; what netbench looks at on the host before a run is package
// preflight.
//
// # Saturation
//
// A cell is saturated when fewer than 99% of the offered messages came
// back or more than 0.1% of those sent were lost; its latency is still
// recorded.
//
// # Where the rest went
//
// A saturated cell is put on one side (Attribute): on the load generator
// when its own receive side lost most of what was lost or it fell behind
// its schedule by a tenth of the measured time or more (then it offered
// the path less than the cell's rate, and the cell says what the load
// generator can do on this host); on the path otherwise (the echo's end,
// the wire, back-pressure). The table marks the load generator's cells
// "[loadgen]".
//
// # Capacity
//
// A row's capacity is the largest offered rate it ran that held (not
// saturated), bracketed by the lowest saturated rate above it; netbench
// narrows the bracket by bisection (NextProbe), running probe cells
// between the two.
//
// # Conservation
//
// Every message sent must be either received or counted as lost by some
// layer of either end (dgramio.Stats.Lost and the tools' own drops), computed
// from counters that are not derived from sent minus received. What does not
// add up is reported as unaccounted.
package bench
