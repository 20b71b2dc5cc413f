pub mod pv_controller;
