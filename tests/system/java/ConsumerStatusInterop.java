// Apache RocketMQ 5.2.0's admin API (DefaultMQAdminExt.getConsumeStatus, what the tools'
// GetConsumerStatusCommand calls; 5.2.0's mqadmin does not register that command) against a
// rocketrio NameServer and broker, for tests/system/test_interop_query_cq.py: asks the broker of
// topic args[1] for the offsets of group args[2]'s members (INVOKE_BROKER_TO_GET_CONSUMER_STATUS).
// Prints one line per (client, queue): "<clientId> <brokerName> <queueId> <offset>".
import java.util.Map;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

public class ConsumerStatusInterop {
    public static void main(String[] args) throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(args[0]);
        admin.setInstanceName("consumer_status_interop");
        admin.start();
        try {
            Map<String, Map<MessageQueue, Long>> table = admin.getConsumeStatus(args[1], args[2], "");
            for (Map.Entry<String, Map<MessageQueue, Long>> e : table.entrySet()) {
                for (Map.Entry<MessageQueue, Long> q : e.getValue().entrySet()) {
                    System.out.println(e.getKey() + " " + q.getKey().getBrokerName() + " "
                        + q.getKey().getQueueId() + " " + q.getValue());
                }
            }
        } finally {
            admin.shutdown();
        }
    }
}
