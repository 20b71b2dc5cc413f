//! In-tree plugins, one file each, named after the upstream plugin they implement.

pub mod catalog;
pub mod names;
