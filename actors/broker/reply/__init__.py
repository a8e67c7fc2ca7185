"""Request-reply (RPC) messages: SEND_REPLY_MESSAGE(_V2) and the push to the requester."""
