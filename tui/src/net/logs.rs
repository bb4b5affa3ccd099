//! The logs pane's stream: `AllocService.Logs` for its target, followed, every chunk sent
//! to the state as [`Update::Logs`] until the stream ends or the task is aborted. Opened on
//! the server followed, or the next that answers.

use super::servers::Servers;
use crate::app::{LogNews, LogTarget, Update};
use drover_proto::v1 as pb;
use tokio::sync::mpsc;

pub async fn stream(servers: Servers, target: LogTarget, updates: mpsc::Sender<Update>) {
    let request = pb::AllocLogsRequest {
        alloc_id: target.alloc_id.to_string(),
        task: target.task.clone().unwrap_or_default(),
        stderr: target.stderr,
        follow: true,
        tail_lines: Some(crate::app::LOG_TAIL_LINES),
    };
    let opened = servers
        .open(|channel| {
            let request = request.clone();
            async move {
                let mut client = pb::alloc_service_client::AllocServiceClient::new(channel);
                client.logs(request).await
            }
        })
        .await;
    let ended = match opened {
        Err(status) => Err(status.message().to_owned()),
        Ok(answer) => {
            let mut stream = answer.into_inner();
            loop {
                match stream.message().await {
                    Ok(Some(chunk)) => {
                        let news = Update::Logs(target.clone(), LogNews::Data(chunk.data));
                        if updates.send(news).await.is_err() {
                            return;
                        }
                    }
                    Ok(None) => break Ok(()),
                    Err(status) => break Err(status.message().to_owned()),
                }
            }
        }
    };
    let _ = updates
        .send(Update::Logs(target, LogNews::Ended(ended)))
        .await;
}
