"""The admin requests' rules (Kafka 2.x's ZkAdminManager and friends), over ZooKeeper and the metadata cache.

  admin_manager.py          AdminManager: CreateTopics / CreatePartitions / DeleteTopics and auto-creation
  delayed_create_topics.py  DelayedCreateTopics: CreateTopics / CreatePartitions waiting for its partitions'
                            leaders
  config_admin.py           DescribeConfigs / AlterConfigs / IncrementalAlterConfigs over /config
  scram_admin.py            Describe/AlterUserScramCredentials (KIP-554): ZkAdminManager's rules over /config/users
  producer_id_manager.py    producer id blocks from ZooKeeper (idempotence)
  controller_channel.py     what a broker forwards to the controller process: an admin client's ElectLeaders,
                            the console's DescribeEvents
"""
