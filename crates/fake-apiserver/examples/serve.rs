//! Runs the fake API server on its own until Ctrl-C, for developers: point `ferrosched run`
//! or `ferrosched bench --kubeconfig` at it without a cluster.
//!
//! `cargo run --release -p fake-apiserver --example serve [--tls] [--disable=COLLECTION]...
//! [KUBECONFIG_OUT]` prints the kubeconfig's path (copied to KUBECONFIG_OUT when given) on
//! stdout. `--tls` serves HTTPS with HTTP/2, as kube-apiserver does; without it, plain
//! HTTP/1.1. `--disable=podgroups` (any collection of `fake_apiserver::RESOURCES`) serves
//! 404 for it, as a server without that API.

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let tls = args.iter().any(|a| a == "--tls");
    let disabled: Vec<String> = args
        .iter()
        .filter_map(|a| a.strip_prefix("--disable="))
        .map(str::to_string)
        .collect();
    args.retain(|a| a != "--tls" && !a.starts_with("--disable="));
    for c in &disabled {
        if !fake_apiserver::RESOURCES.iter().any(|r| r.collection == c) {
            eprintln!("--disable={c}: the fake API server serves no such collection");
            std::process::exit(2);
        }
    }
    let server = if tls {
        fake_apiserver::FakeApiServer::start_tls().await
    } else {
        fake_apiserver::FakeApiServer::start().await
    };
    for c in &disabled {
        server.disable(c);
    }
    let mut path = server.kubeconfig();
    if let Some(out) = args.first() {
        let out = std::path::PathBuf::from(out);
        std::fs::copy(&path, &out).expect("cannot write the kubeconfig");
        path = out;
    }
    println!("{}", path.display());
    let scheme = if tls { "https" } else { "http" };
    eprintln!(
        "fake API server on {scheme}://{}; Ctrl-C stops it",
        server.addr
    );
    let _ = tokio::signal::ctrl_c().await;
}
