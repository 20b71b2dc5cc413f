//! `ferrosched simulate`: schedule a cluster dump through the real framework, offline.

pub mod load;
