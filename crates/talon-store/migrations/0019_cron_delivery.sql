-- Talon schema v19: a scheduled job may deliver its result to a chat of a configured channel
-- (`[channels.<name>]`) besides its session. `deliver_to` is the chat, then `/` and a forum
-- topic or thread when there is one. `deliver_pinned` is 1 when the job was made from a
-- conversation of that very chat (which may always be answered); otherwise the chat must stay
-- in the channel's `automated_chats`, checked again at each delivery.
ALTER TABLE cron_jobs ADD COLUMN deliver_channel TEXT NOT NULL DEFAULT '';
ALTER TABLE cron_jobs ADD COLUMN deliver_to TEXT NOT NULL DEFAULT '';
ALTER TABLE cron_jobs ADD COLUMN deliver_pinned BIGINT NOT NULL DEFAULT 0;

-- Named leases: work only one gateway may do at a time (reading a Telegram bot's updates by
-- long polling: two readers would split the bot's messages between them). The holder renews
-- `until`; another takes the lease once it has run out.
CREATE TABLE leases (
    name TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    until_ms BIGINT NOT NULL
);
