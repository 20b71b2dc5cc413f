pub mod fake_apiserver;
