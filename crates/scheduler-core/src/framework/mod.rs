//! The plugin framework: extension points, statuses, cycle state and per-profile frameworks.

mod extension_point;

pub use extension_point::ExtensionPoint;
