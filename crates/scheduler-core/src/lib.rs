//! ferrosched's scheduling logic, with no network and no async runtime.
//!
//! Data flows one way: API objects -> compact views ([`types`]) -> cache and snapshot
//! ([`cache`]) -> plugins run by a per-profile [`framework::Framework`] -> a
//! [`schedule_one::Decision`] that the controller crate acts on. Nothing here calls back
//! into the controller.
#![forbid(unsafe_code)]

pub mod bench_workloads;
pub mod cache;
pub mod config;
pub mod explain;
pub mod framework;
pub mod group_preemption;
mod k8s_names;
pub mod outcome;
pub mod plugins;
pub mod pod_group_manager;
pub mod pod_group_tree;
pub mod policy;
pub mod queue;
mod schedule_batch;
pub mod schedule_extenders;
pub mod schedule_group;
pub mod schedule_one;
mod schedule_placements;
pub mod schedule_tree;
pub mod simulate;
pub mod types;
pub mod yaml_budget;
