pub mod pv_controller;

/// GET over plain HTTP/1.0 with `Authorization: Bearer <token>` when given; returns the
/// status line and body.
#[allow(dead_code)] // not every test crate that includes `support` calls it
pub async fn http_get_as(
    addr: std::net::SocketAddr,
    path: &str,
    token: Option<&str>,
) -> (String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n{auth}\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let status = out.lines().next().unwrap_or_default().to_string();
    let body = out.split("\r\n\r\n").nth(1).unwrap_or_default().to_string();
    (status, body)
}

/// Polls `f` every 20 ms for at most 10 s.
#[allow(dead_code)] // not every test crate that includes `support` calls it
pub async fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !f() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// A controller a test started: its stop signal and its task.
#[allow(dead_code)] // not every test crate that includes `support` calls it
pub struct Started {
    pub stop: tokio::sync::oneshot::Sender<()>,
    pub task: tokio::task::JoinHandle<controller::Result<()>>,
}

/// Starts the controller against `server` with `config`, as `ferrosched run` does.
#[allow(dead_code)] // not every test crate that includes `support` calls it
pub async fn start(server: &fake_apiserver::FakeApiServer, config: &str) -> Started {
    let loaded = scheduler_core::config::load_str(config, "test.yaml").unwrap();
    let client = controller::client(Some(&server.kubeconfig()))
        .await
        .unwrap();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(controller::run(controller::RunOptions::new(
        client,
        loaded,
        Box::pin(async move {
            let _ = rx.await;
        }),
    )));
    Started { stop, task }
}

/// Asks a controller started by a test to stop and waits (10 s at most) for a clean exit.
#[allow(dead_code)] // not every test crate that includes `support` calls it
pub async fn stop_controller(
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<controller::Result<()>>,
) {
    let _ = stop.send(());
    tokio::time::timeout(std::time::Duration::from_secs(10), task)
        .await
        .expect("controller stops promptly")
        .expect("controller task")
        .expect("controller exits cleanly");
}

/// Polls the async `f` every 20 ms for at most 10 s.
#[allow(dead_code)] // not every test crate that includes `support` calls it
pub async fn wait_for_async<F: std::future::Future<Output = bool>>(
    what: &str,
    mut f: impl FnMut() -> F,
) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !f().await {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}
