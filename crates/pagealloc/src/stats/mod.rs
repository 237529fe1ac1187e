//! Statistics: event counters now; lock-free free-page counts and the /proc
//! reports build on the zone's counters (see `zone::ZoneStats`).

pub mod events;
