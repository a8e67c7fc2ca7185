// Apache RocketMQ 5.2.0's own Java client against a rocketrio NameServer and broker
// (tests/system/test_interop_lite_pull_reply.py compiles and runs this): lite pull in subscribe
// and assign + seek modes, and request-reply. Prints one JSON line of what it saw.
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

public class LitePullReplyInterop {
    static String ns;

    static String body(MessageExt m) {
        return new String(m.getBody(), StandardCharsets.UTF_8);
    }

    static void send(String topic, String prefix, int n) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer("interop_pg");
        p.setNamesrvAddr(ns);
        p.setInstanceName("send-" + topic);
        p.start();
        for (int i = 0; i < n; i++) {
            p.send(new Message(topic, (prefix + i).getBytes(StandardCharsets.UTF_8)));
        }
        p.shutdown();
    }

    static String subscribe(String topic) throws Exception {
        send(topic, "s", 20);
        DefaultLitePullConsumer c = new DefaultLitePullConsumer("interop_lite_sub");
        c.setNamesrvAddr(ns);
        c.setAutoCommit(false);
        c.setConsumeFromWhere(org.apache.rocketmq.common.consumer.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.subscribe(topic, "*");
        c.start();
        TreeSet<String> got = new TreeSet<>();
        long deadline = System.currentTimeMillis() + 60_000;
        while (got.size() < 20 && System.currentTimeMillis() < deadline) {
            for (MessageExt m : c.poll(1000)) {
                got.add(body(m));
            }
        }
        c.commitSync();
        long committed = 0;
        for (MessageQueue mq : c.fetchMessageQueues(topic)) {
            committed += Math.max(c.committed(mq), 0);
        }
        c.shutdown();
        return "\"subscribe\": {\"received\": " + got.size() + ", \"committed\": " + committed + "}";
    }

    static String assign(String topic) throws Exception {
        send(topic, "a", 10);
        DefaultLitePullConsumer c = new DefaultLitePullConsumer("interop_lite_assign");
        c.setNamesrvAddr(ns);
        c.start();
        Collection<MessageQueue> mqs = c.fetchMessageQueues(topic);
        MessageQueue mq = mqs.iterator().next();
        c.assign(Collections.singletonList(mq));
        c.seek(mq, 5);
        List<String> got = new ArrayList<>();
        long deadline = System.currentTimeMillis() + 60_000;
        while (got.size() < 5 && System.currentTimeMillis() < deadline) {
            for (MessageExt m : c.poll(1000)) {
                got.add(body(m));
            }
        }
        c.seekToBegin(mq);
        List<String> again = new ArrayList<>();
        deadline = System.currentTimeMillis() + 60_000;
        while (again.size() < 10 && System.currentTimeMillis() < deadline) {
            for (MessageExt m : c.poll(1000)) {
                again.add(body(m));
            }
        }
        c.shutdown();
        return "\"assign\": {\"after_seek\": \"" + String.join(",", got) + "\", \"from_begin\": "
            + again.size() + ", \"first\": \"" + (again.isEmpty() ? "" : again.get(0)) + "\"}";
    }

    static final AtomicInteger replied = new AtomicInteger();

    // a push consumer that answers every request with "re:" + its body
    static DefaultMQPushConsumer serve(String topic, DefaultMQProducer responder) throws Exception {
        DefaultMQPushConsumer server = new DefaultMQPushConsumer("interop_rpc_server_" + topic);
        server.setNamesrvAddr(ns);
        server.setInstanceName("server");
        server.subscribe(topic, "*");
        server.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                try {
                    Message reply = MessageUtil.createReplyMessage(m, ("re:" + body(m)).getBytes(StandardCharsets.UTF_8));
                    responder.send(reply);
                    replied.incrementAndGet();
                } catch (Exception e) {
                    System.err.println("reply failed: " + e);
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        server.start();
        return server;
    }

    static DefaultMQProducer responder() throws Exception {
        DefaultMQProducer responder = new DefaultMQProducer("interop_reply_pg");
        responder.setNamesrvAddr(ns);
        responder.setInstanceName("responder");
        responder.start();
        return responder;
    }

    // only the responder side, for a Python requester: prints "ready", serves until it has
    // replied `n` times or 120 s passed
    static String serveOnly(String topic, int n) throws Exception {
        DefaultMQProducer responder = responder();
        DefaultMQPushConsumer server = serve(topic, responder);
        System.out.println("ready");
        System.out.flush();
        long deadline = System.currentTimeMillis() + 120_000;
        while (replied.get() < n && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
        }
        Thread.sleep(1000);
        server.shutdown();
        responder.shutdown();
        return "\"serve\": {\"replied\": " + replied.get() + "}";
    }

    // only the requester side, for a Python responder
    static String ask(String topic) throws Exception {
        return ask(topic, "ask");
    }

    static String request(String topic) throws Exception {
        DefaultMQProducer responder = responder();
        DefaultMQPushConsumer server = serve(topic, responder);
        String out = ask(topic, "request");
        server.shutdown();
        responder.shutdown();
        return out;
    }

    static String ask(String topic, String name) throws Exception {
        DefaultMQProducer requester = new DefaultMQProducer("interop_req_pg");
        requester.setNamesrvAddr(ns);
        requester.setInstanceName("requester");
        requester.start();
        int ok = 0;
        String firstTopic = "";
        String error = "";
        for (int i = 0; i < 10; i++) {
            try {
                Message reply = requester.request(new Message(topic, ("q" + i).getBytes(StandardCharsets.UTF_8)), 10_000);
                if (("re:q" + i).equals(new String(reply.getBody(), StandardCharsets.UTF_8))) {
                    ok++;
                    firstTopic = reply.getTopic();
                }
            } catch (Exception e) {
                error = e.toString().replace("\"", "'");
            }
        }
        requester.shutdown();
        return "\"" + name + "\": {\"replies\": " + ok + ", \"reply_topic\": \"" + firstTopic + "\", \"error\": \"" + error + "\"}";
    }

    public static void main(String[] args) throws Exception {
        ns = args[0];
        String part = args[1];
        String out;
        switch (part) {
            case "subscribe": out = subscribe("InteropLiteSub"); break;
            case "assign": out = assign("InteropLiteAssign"); break;
            case "serve": out = serveOnly("InteropRpcPy", 10); break;
            case "ask": out = ask("InteropRpcJava"); break;
            default: out = request("InteropRpc"); break;
        }
        System.out.println("{" + out + "}");
        System.exit(0);
    }
}
