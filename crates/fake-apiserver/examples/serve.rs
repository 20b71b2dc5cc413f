//! Runs the fake API server on its own until Ctrl-C, for developers: point `ferrosched run`
//! or `ferrosched bench --kubeconfig` at it without a cluster.
//!
//! `cargo run --release -p fake-apiserver --example serve [KUBECONFIG_OUT]` prints the
//! kubeconfig's path (copied to KUBECONFIG_OUT when given) on stdout.

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let server = fake_apiserver::FakeApiServer::start().await;
    let mut path = server.kubeconfig();
    if let Some(out) = std::env::args_os().nth(1) {
        let out = std::path::PathBuf::from(out);
        std::fs::copy(&path, &out).expect("cannot write the kubeconfig");
        path = out;
    }
    println!("{}", path.display());
    eprintln!("fake API server on http://{}; Ctrl-C stops it", server.addr);
    let _ = tokio::signal::ctrl_c().await;
}
