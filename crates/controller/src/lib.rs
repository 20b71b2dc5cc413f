//! The only crate that talks to the API server. It feeds scheduler-core's cache and queue
//! from informers, runs the scheduling loop and carries out its decisions (bindings, status
//! patches, events, preemption). Issue 6 builds it; it is empty until then.
#![forbid(unsafe_code)]
