pub mod fake_apiserver;
pub mod pv_controller;
